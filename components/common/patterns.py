"""Per-language regular expressions kept in YAML, compiled once by the components that match questions against
them (the rules router, the answer-unit rule)."""

from __future__ import annotations

import re
from typing import Any


def compile_patterns(patterns: Any, where: str) -> list[re.Pattern[str]]:
    """`{language: [regex, ...]}` compiled case-insensitive, every language's together (a pattern only matches
    its own script); a malformed entry fails naming `where`."""
    if not isinstance(patterns, dict):
        raise ValueError(f"{where}: expected {{language: [regex, ...]}}, got {patterns!r}")
    compiled = []
    for language, texts in patterns.items():
        for j, text in enumerate(texts or []):
            try:
                compiled.append(re.compile(text, re.IGNORECASE))
            except re.error as e:
                raise ValueError(f"{where}.{language}[{j}]: {text!r} does not compile: {e}") from e
    return compiled
