"""Dataset loaders: each `dataset.kind` becomes canonical Documents plus golden items (see docs/architecture.md)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from omegaconf import DictConfig

from experiments.datasets.base import Dataset, DatasetError, config_dict
from experiments.datasets.beir import load_beir
from experiments.datasets.demo import load_demo
from experiments.datasets.halueval import load_halueval
from experiments.datasets.local import load_local

KINDS = ("demo", "local", "beir", "halueval")

__all__ = ["KINDS", "Dataset", "DatasetError", "load_dataset"]


def load_dataset(cfg: DictConfig | Mapping, cache_dir: Path) -> Dataset:
    """Dispatch on `dataset.kind`; `cache_dir` holds downloads (only halueval needs one)."""
    config = config_dict(cfg)
    kind = config.get("kind")
    if kind == "demo":
        return load_demo(config)
    if kind == "local":
        return load_local(config)
    if kind == "beir":
        return load_beir(config)
    if kind == "halueval":
        return load_halueval(config, Path(cache_dir))
    raise DatasetError(f"dataset.kind: unknown kind {kind!r} (valid: {', '.join(KINDS)})")
