"""One builder per index fingerprint across processes: parallel sweep jobs wait on the fingerprint's lock for the
first builder instead of re-embedding, and what a killed build left (its temp folder, its lock file) is cleared by
the next one."""

from __future__ import annotations

import errno
import fcntl
import os
import shutil
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pipelines.errors import UserError
from pipelines.index.snapshot import stale_temp_folders


@contextmanager
def exclusive_build(cache_dir: Path, fingerprint: str) -> Iterator[None]:
    """One builder per fingerprint across processes, after clearing what killed builds left in `cache_dir`."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    remove_stale(cache_dir)
    with build_lock(cache_dir, fingerprint):
        yield


@contextmanager
def build_lock(cache_dir: Path, fingerprint: str, blocking: bool = True) -> Iterator[bool]:
    """Holds the fingerprint's lock; yields False at once when not `blocking` and another process holds it.

    The lock file is removed on release while still held, so finished builds leave none behind.
    """
    path = cache_dir / f".{fingerprint}.lock"
    fd = _locked_fd(path, blocking)
    if fd is None:
        yield False
        return
    try:
        yield True
    finally:
        path.unlink(missing_ok=True)
        os.close(fd)


def _locked_fd(path: Path, blocking: bool) -> int | None:
    """An flock on the file now at `path`; None when not `blocking` and it is held elsewhere.

    A lock won on a file that its holder unlinked meanwhile guards nothing (the next process creates a new file),
    so then it retries on the file that is there now.
    """
    while True:
        fd = _open_lock_file(path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if blocking else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        except BaseException:
            os.close(fd)
            raise
        if _is_file_at(fd, path):
            return fd
        os.close(fd)


def _open_lock_file(path: Path) -> int:
    """The lock file at `path`, created if absent. Ours is an empty regular file, so that releasing it (an unlink)
    never removes anything else: a symlink or a file with content standing there is a user's, and refused."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    except OSError as e:
        if e.errno != errno.ELOOP:
            raise
        raise UserError(f"index cache: {path} is a symlink, not ragtune's lock file; move it out of {path.parent}") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_size > 0:
        os.close(fd)
        raise UserError(f"index cache: {path} holds data, so it is not ragtune's (empty) lock file; move it out of "
                        f"{path.parent}")
    return fd


def _is_file_at(fd: int, path: Path) -> bool:
    try:
        there = path.stat()
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (held.st_dev, held.st_ino) == (there.st_dev, there.st_ino)


def remove_stale(cache_dir: Path) -> None:
    """Removes what killed builds leave behind: temp folders no live process writes, lock files nobody holds
    (empty regular files, as build_lock leaves them; a symlink or a file with content is not ours)."""
    for folder in stale_temp_folders(cache_dir):
        shutil.rmtree(folder, ignore_errors=True)
    for lock in cache_dir.glob(".*.lock"):
        if not _is_empty_file(lock):
            continue
        with build_lock(cache_dir, lock.name[1 : -len(".lock")], blocking=False):
            pass  # held elsewhere: left alone; free: taken, and so unlinked on release


def _is_empty_file(path: Path) -> bool:
    try:
        info = path.lstat()
    except FileNotFoundError:  # released meanwhile
        return False
    return stat.S_ISREG(info.st_mode) and info.st_size == 0
