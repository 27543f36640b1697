"""List and prune the index cache (one snapshot folder per index fingerprint).

    ragtune cache list
    ragtune cache prune --older-than 30d --keep-last 5 --dry-run

Prune removes snapshots that are neither among the --keep-last most recently used nor used within --older-than,
never one whose build lock is held, plus temp folders that killed builds left behind. It removes only folders that
ragtune wrote (they bear its marker, or its manifest): anything else in the folder, a symlink included, is listed as
"not ours" and left alone, so a mistyped --cache-dir costs nothing.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from components.common.paths import cache_root
from pipelines.errors import UserError
from pipelines.index.locking import build_lock
from pipelines.index.snapshot import (
    LAST_USED,
    DamagedIndexError,
    read_manifest,
    stale_temp_folders,
    written_by_ragtune,
)

MIB = 1024 * 1024
DURATION = re.compile(r"(\d+)([smhdw])")
UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
TIME_FORMAT = "%Y-%m-%d %H:%M"


@dataclass(frozen=True)
class Snapshot:
    path: Path
    size: int
    chunks: int | None  # None: no readable manifest (damaged, or written by an older format)
    created: datetime
    last_used: datetime


@dataclass(frozen=True)
class NotOurs:
    """An entry of the cache folder that ragtune did not write: listed, never removed."""

    path: Path
    why: str


def default_cache_dir() -> Path:
    """The config default, `${paths.cache}/index` with paths.cache = $RAGTUNE_CACHE or .cache/ragtune."""
    return cache_root() / "index"


def scan(cache_dir: Path) -> tuple[list[Snapshot], list[NotOurs]]:
    """The snapshots, most recently used first, and the entries ragtune did not write; UserError when `cache_dir`
    is no folder. Hidden entries are build locks, temp folders (`stale_temp_folders` judges those) or a user's."""
    if not cache_dir.is_dir():
        raise UserError(f"--cache-dir {cache_dir}: {'not a folder' if cache_dir.exists() else 'no such folder'}")
    found, foreign = [], []
    for entry in sorted(cache_dir.iterdir()):
        if entry.name.startswith("."):
            continue
        if written_by_ragtune(entry, entry.name):
            found.append(_snapshot(entry))
        else:
            foreign.append(NotOurs(entry, _why_not_ours(entry)))
    return sorted(found, key=lambda s: s.last_used, reverse=True), foreign


def _why_not_ours(entry: Path) -> str:
    if entry.is_symlink():
        return "a symbolic link"
    return "a folder without ragtune's marker or manifest" if entry.is_dir() else "a file"


def _snapshot(path: Path) -> Snapshot:
    try:
        manifest = read_manifest(path)
        chunks, created = manifest["chunks"], datetime.fromtimestamp(manifest["created"])
    except DamagedIndexError:
        chunks, created = None, datetime.fromtimestamp(path.stat().st_mtime)
    used = path / LAST_USED
    last_used = datetime.fromtimestamp(used.stat().st_mtime) if used.exists() else created
    return Snapshot(path, _size(path), chunks, created, last_used)


def _size(path: Path) -> int:
    """Of the files under `path`, symlinks neither followed nor counted."""
    return sum(f.lstat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


def to_prune(found: list[Snapshot], older_than: timedelta | None, keep_last: int | None, now: datetime) -> list[Snapshot]:
    """Snapshots (most recently used first) beyond the `keep_last` newest and not used within `older_than`."""
    return [s for s in found[keep_last or 0 :] if older_than is None or now - s.last_used > older_than]


def print_list(found: list[Snapshot], foreign: list[NotOurs]) -> None:
    print(f"{'fingerprint':<20}  {'MiB':>9}  {'chunks':>7}  {'created':<16}  last used")
    for s in found:
        chunks = "damaged" if s.chunks is None else str(s.chunks)
        print(
            f"{s.path.name:<20}  {s.size / MIB:>9.1f}  {chunks:>7}  "
            f"{s.created:{TIME_FORMAT}}  {s.last_used:{TIME_FORMAT}}"
        )
    print(f"{len(found)} snapshot(s), {sum(s.size for s in found) / MIB:.1f} MiB")
    print_not_ours(foreign)


def print_not_ours(foreign: list[NotOurs]) -> None:
    for entry in foreign:
        print(f"not ours: {entry.path.name} ({entry.why}); prune leaves it alone")


def prune(cache_dir: Path, selected: list[Snapshot], foreign: list[NotOurs], dry_run: bool) -> None:
    """Removes `selected` and stale temp folders, printing each, what is not ours and the total; a locked snapshot
    is kept."""
    verb = "would remove" if dry_run else "removed"
    freed = removed = 0
    for s in selected:
        with build_lock(cache_dir, s.path.name, blocking=False) as held:
            if not held:
                print(f"kept {s.path.name}: a running build holds its lock")
                continue
            if not dry_run:
                shutil.rmtree(s.path)
        print(f"{verb} {s.path.name}  {s.size / MIB:.1f} MiB  (last used {s.last_used:{TIME_FORMAT}})")
        freed, removed = freed + s.size, removed + 1
    for folder in stale_temp_folders(cache_dir):
        size = _size(folder)
        if not dry_run:
            shutil.rmtree(folder, ignore_errors=True)
        print(f"{verb} {folder.name}  {size / MIB:.1f} MiB  (left by a killed build)")
        freed, removed = freed + size, removed + 1
    print_not_ours(foreign)
    print(f"{'would free' if dry_run else 'freed'} {freed / MIB:.1f} MiB in {removed} folder(s)")


def duration(text: str) -> timedelta:
    """A span such as 30d or 12h: the argparse type of --older-than here and of online-report's --since."""
    match = DURATION.fullmatch(text)
    if match is None:
        raise argparse.ArgumentTypeError(f"expected a number and a unit s, m, h, d or w (e.g. 30d), got {text!r}")
    try:
        return timedelta(**{UNITS[match[2]]: int(match[1])})
    except OverflowError:
        raise argparse.ArgumentTypeError(f"{text!r} is longer than a timedelta can hold") from None


def _count(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {text!r}")
    return int(text)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--cache-dir", type=Path, default=default_cache_dir(), help="index cache (default: $RAGTUNE_CACHE/index, else .cache/ragtune/index)"
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("list", help="show each snapshot: fingerprint, size, chunks, created, last used")
    pruning = commands.add_parser("prune", help="remove snapshots by last use")
    pruning.add_argument("--older-than", type=duration, help="remove snapshots not used for this long, e.g. 30d")
    pruning.add_argument("--keep-last", type=_count, help="always keep the N most recently used snapshots")
    pruning.add_argument("--dry-run", action="store_true", help="print what would be removed, remove nothing")
    args = parser.parse_args(argv)
    if args.command == "prune" and args.older_than is None and args.keep_last is None:
        parser.error("prune needs --older-than and/or --keep-last")
    try:
        found, foreign = scan(args.cache_dir)
        if args.command == "list":
            print_list(found, foreign)
            return 0
        selected = to_prune(found, args.older_than, args.keep_last, datetime.now())
        prune(args.cache_dir, selected, foreign, args.dry_run)
    except OSError as e:  # a folder or file that cannot be read or removed (permissions)
        raise UserError(f"--cache-dir {args.cache_dir}: cannot access {e.filename or args.cache_dir} "
                        f"({e.strerror or e})") from None
    return 0


if __name__ == "__main__":
    sys.exit(main())
