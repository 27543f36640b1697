"""`ragtune config-docs [--check]`: writes docs/config.md from conf/ and its records (experiments/runs/config_docs.py);
with --check, exits 1 when the file differs from what it would write."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from experiments.runs.config import GROUP_SCHEMAS, PROJECT_DIR
from experiments.runs.config_docs import config_reference
from serving.settings import SERVE_SECTIONS

CONFIG_DOCS = PROJECT_DIR / "docs" / "config.md"


def reference() -> str:
    return config_reference(SERVE_SECTIONS, GROUP_SCHEMAS)


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="ragtune config-docs", description=__doc__)
    parser.add_argument("--check", action="store_true", help="exit 1 when docs/config.md is out of date")
    args = parser.parse_args(argv)
    text = reference()
    if args.check:
        current = CONFIG_DOCS.read_text(encoding="utf-8") if CONFIG_DOCS.exists() else ""
        if current != text:
            print(f"{CONFIG_DOCS.relative_to(PROJECT_DIR)} is out of date: run `ragtune config-docs`", file=sys.stderr)
            return 1
        return 0
    CONFIG_DOCS.write_text(text, encoding="utf-8")
    print(f"wrote {CONFIG_DOCS.relative_to(PROJECT_DIR)}")
    return 0
