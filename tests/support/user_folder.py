"""A folder of a user's own files, and its checksum, for the data-loss tests: a command that must leave the folder
alone is run against it, and the checksum before and after must be equal."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

USER_FILES = {
    "thesis/chapter1.md": "# Chapter 1\n\nTwo years of work.\n",
    "thesis/figures/plot.csv": "x,y\n1,2\n",
    "notes.txt": "do not delete\n",
}


def make_user_folder(path: Path, days_old: int = 2) -> Path:
    """Writes USER_FILES under `path`, each file and folder dated `days_old` days back."""
    for name, text in USER_FILES.items():
        file = path / name
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(text, encoding="utf-8")
    when = os.path.getmtime(path) - days_old * 86400 if path.exists() else None
    for item in sorted(path.rglob("*"), reverse=True):
        os.utime(item, (when, when), follow_symlinks=False)
    return path


def checksum(path: Path) -> str:
    """Of every name, file content and symlink target under `path` (not following links)."""
    digest = hashlib.sha256()
    for item in sorted(path.rglob("*")):
        digest.update(str(item.relative_to(path)).encode())
        if item.is_symlink():
            digest.update(b"->" + os.readlink(item).encode())
        elif item.is_file():
            digest.update(item.read_bytes())
    return digest.hexdigest()
