"""List and prune the index cache (one snapshot folder per index fingerprint).

    ragtune cache list
    ragtune cache prune --older-than 30d --keep-last 5 --dry-run

Prune removes snapshots that are neither among the --keep-last most recently used nor used within --older-than,
never one whose build lock is held, plus temp folders that killed builds left behind.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from pipelines.ingest import LAST_USED, DamagedIndexError, build_lock, read_manifest, stale_temp_folders

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


def default_cache_dir() -> Path:
    """The config default, `${paths.cache}/index` with paths.cache = $RAGTUNE_CACHE or .cache/ragtune."""
    return Path(os.environ.get("RAGTUNE_CACHE", ".cache/ragtune")) / "index"


def snapshots(cache_dir: Path) -> list[Snapshot]:
    """Every snapshot folder, most recently used first."""
    if not cache_dir.is_dir():
        return []
    found = [_snapshot(p) for p in cache_dir.iterdir() if p.is_dir() and not p.name.startswith(".")]
    return sorted(found, key=lambda s: s.last_used, reverse=True)


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
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def to_prune(found: list[Snapshot], older_than: timedelta | None, keep_last: int | None, now: datetime) -> list[Snapshot]:
    """Snapshots (most recently used first) beyond the `keep_last` newest and not used within `older_than`."""
    return [s for s in found[keep_last or 0 :] if older_than is None or now - s.last_used > older_than]


def print_list(found: list[Snapshot]) -> None:
    print(f"{'fingerprint':<20}  {'MiB':>9}  {'chunks':>7}  {'created':<16}  last used")
    for s in found:
        chunks = "damaged" if s.chunks is None else str(s.chunks)
        print(
            f"{s.path.name:<20}  {s.size / MIB:>9.1f}  {chunks:>7}  "
            f"{s.created:{TIME_FORMAT}}  {s.last_used:{TIME_FORMAT}}"
        )
    print(f"{len(found)} snapshot(s), {sum(s.size for s in found) / MIB:.1f} MiB")


def prune(cache_dir: Path, selected: list[Snapshot], dry_run: bool) -> None:
    """Removes `selected` and stale temp folders, printing each and the total; a locked snapshot is kept."""
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
    print(f"{'would free' if dry_run else 'freed'} {freed / MIB:.1f} MiB in {removed} folder(s)")


def _duration(text: str) -> timedelta:
    match = DURATION.fullmatch(text)
    if match is None:
        raise argparse.ArgumentTypeError(f"expected a number and a unit s, m, h, d or w (e.g. 30d), got {text!r}")
    return timedelta(**{UNITS[match[2]]: int(match[1])})


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
    pruning.add_argument("--older-than", type=_duration, help="remove snapshots not used for this long, e.g. 30d")
    pruning.add_argument("--keep-last", type=_count, help="always keep the N most recently used snapshots")
    pruning.add_argument("--dry-run", action="store_true", help="print what would be removed, remove nothing")
    args = parser.parse_args(argv)
    found = snapshots(args.cache_dir)
    if args.command == "list":
        print_list(found)
        return 0
    if args.older_than is None and args.keep_last is None:
        parser.error("prune needs --older-than and/or --keep-last")
    prune(args.cache_dir, to_prune(found, args.older_than, args.keep_last, datetime.now()), args.dry_run)
    return 0


if __name__ == "__main__":
    sys.exit(main())
