"""The job folder must be writable before Hydra makes it: a Hydra callback that says so in one line (exit 2)."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

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
