"""Dataset loaders: each `dataset.kind` becomes canonical Documents plus golden items (see docs/architecture.md)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from experiments.datasets.base import Dataset, DatasetError
from experiments.datasets.beir import load_beir
from experiments.datasets.demo import load_demo
from experiments.datasets.halueval import load_halueval
from experiments.datasets.holdout import holdout
from experiments.datasets.local import corpus_files, load_local
from experiments.datasets.settings import (
    KINDS,
    BeirDataset,
    DatasetSettings,
    DemoDataset,
    HaluEvalDataset,
    LocalDataset,
    dataset_settings,
)
from experiments.datasets.table_rows import check_table_rows
from pipelines.conversion import Conversion

__all__ = ["KINDS", "Dataset", "DatasetError", "load_dataset"]


def load_dataset(cfg: DatasetSettings | Mapping[str, Any], cache_dir: Path) -> Dataset:
    """The data set `cfg` (Hydra's `dataset` section, or a mapping written by hand) names, by its `kind`; `cache_dir`
    holds downloads (only halueval needs one)."""
    settings = dataset_settings(cfg)
    dataset = _load(settings, Path(cache_dir))
    check_table_rows(dataset.golden, settings.sql)
    return holdout(dataset, settings.holdout)


def corpus_documents(cfg: DatasetSettings | Mapping[str, Any], cache_dir: Path) -> Conversion:
    """The documents of a data set and the files skipped, without its golden set: a local corpus needs none
    (`ragtune testset`)."""
    settings = dataset_settings(cfg)
    if isinstance(settings, LocalDataset):
        return corpus_files(settings)
    dataset = _load(settings, Path(cache_dir))
    return Conversion(dataset.documents, dataset.skipped_files)


def _load(settings: DatasetSettings, cache_dir: Path) -> Dataset:
    if isinstance(settings, DemoDataset):
        return load_demo(settings)
    if isinstance(settings, LocalDataset):
        return load_local(settings)
    if isinstance(settings, BeirDataset):
        return load_beir(settings)
    assert isinstance(settings, HaluEvalDataset)
    return load_halueval(settings, cache_dir)
