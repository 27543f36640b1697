"""The command behind a docs page written from the code (`ragtune metrics-docs`, `ragtune config-docs`): it writes
the page, or with --check exits 1 when the file differs from what it would write (tests/test_docs.py and CI)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from components.common.paths import PROJECT_DIR


def page_command(
    argv: Sequence[str], command: str, description: str | None, page: Path, render: Callable[[], str]
) -> int:
    """`ragtune <command> [--check]` for `page`, whose text `render` gives."""
    shown = page.relative_to(PROJECT_DIR)
    parser = argparse.ArgumentParser(prog=f"ragtune {command}", description=description)
    parser.add_argument("--check", action="store_true", help=f"exit 1 when {shown} is out of date")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = page.read_text(encoding="utf-8") if page.exists() else ""
        if current != text:
            print(f"{shown} is out of date: run `ragtune {command}`", file=sys.stderr)
            return 1
        return 0
    page.write_text(text, encoding="utf-8")
    print(f"wrote {shown}")
    return 0
