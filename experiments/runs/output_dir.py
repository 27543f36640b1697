"""Output targets are checked before any work, so a mistake costs one line (exit 2), not a finished job: the job
folder before Hydra makes it (a Hydra callback), and a command's `--out` file or folder."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from pipelines.errors import UserError

EXIT_USER_ERROR = 2


def unwritable(folder: Path) -> str | None:
    """Why nothing can be written in `folder` (created if missing); None when a file can be."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as e:
        return e.strerror or str(e)
    return None


def check_output_file(path: Path, force: bool) -> None:
    """UserError unless `path` can be written as a file: not a folder, nor a symlink, in a writable folder, and
    new unless `force` (a user's file is never overwritten by mistake)."""
    if path.is_dir():
        raise UserError(f"{path} is a folder; name a file to write")
    if path.is_symlink():
        raise UserError(f"{path} is a symbolic link; name the file itself")
    _check_parent(path)
    if path.exists() and not force:
        raise UserError(f"{path} exists; pass --force to overwrite it")


def check_output_folder(path: Path, force: bool, marker: str) -> None:
    """UserError unless `path` can be replaced by a folder built beside it: not a file nor a symlink, in a writable
    folder, and missing, empty or bearing `marker` (this command wrote it) unless `force`."""
    if path.name in ("", ".."):
        raise UserError(f"{path} is no folder of its own to replace; name one inside it, e.g. {path / 'NAME'}")
    if path.is_symlink():
        raise UserError(f"{path} is a symbolic link; name the folder itself")
    if path.exists() and not path.is_dir():
        raise UserError(f"{path} is a file, not a folder")
    _check_parent(path)
    try:
        foreign = path.is_dir() and not (path / marker).is_file() and any(path.iterdir())
    except OSError as e:
        raise UserError(f"cannot read {path} ({e.strerror})") from None
    if foreign and not force:
        raise UserError(f"{path} holds files that ragtune did not write; name a new or empty folder, or pass --force "
                        "to replace it")


def _check_parent(path: Path) -> None:
    """The folder `path` goes in exists or can be made, and takes a new file."""
    for ancestor in path.absolute().parents:
        if ancestor.exists():
            if not ancestor.is_dir():
                raise UserError(f"cannot write {path}: {ancestor} is a file, not a folder")
            break
    problem = unwritable(path.absolute().parent)
    if problem is not None:
        raise UserError(f"cannot write {path}: {path.absolute().parent} is not writable ({problem})")


class OutputDirCheck(Callback):
    """Checks `hydra.run.dir` (a run) or `hydra.sweep.dir` (a sweep) before Hydra, which would stop with a
    traceback, creates it."""

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        self._check(config, "hydra.run.dir", config.hydra.run.dir)

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        self._check(config, "hydra.sweep.dir", config.hydra.sweep.dir)

    @staticmethod
    def _check(config: DictConfig, key: str, folder: str) -> None:
        problem = unwritable(Path(folder))
        if problem is not None:
            print(f"error: config key '{key}': cannot write {folder} ({problem})", file=sys.stderr)
            sys.exit(EXIT_USER_ERROR)
