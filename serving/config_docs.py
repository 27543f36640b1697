"""`ragtune config-docs [--check]`: writes docs/config.md from conf/ and its records (experiments/runs/config_docs.py);
with --check, exits 1 when the file differs from what it would write."""

from __future__ import annotations

from collections.abc import Sequence

from experiments.runs.config import GROUP_SCHEMAS, PROJECT_DIR
from experiments.runs.config_docs import config_reference
from experiments.runs.docs_page import page_command
from serving.settings import SERVE_SECTIONS

CONFIG_DOCS = PROJECT_DIR / "docs" / "config.md"


def reference() -> str:
    return config_reference(SERVE_SECTIONS, GROUP_SCHEMAS)


def main(argv: Sequence[str]) -> int:
    return page_command(argv, "config-docs", __doc__, CONFIG_DOCS, reference)
