"""Hydra entry point: `python run.py pipeline=hybrid retriever.top_k=50`, or `-m` for a sweep."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

for key, value in {
    "HAYSTACK_TELEMETRY_ENABLED": "False",
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "TOKENIZERS_PARALLELISM": "false",
}.items():
    os.environ.setdefault(key, value)

import hydra  # noqa: E402
from haystack.core.errors import PipelineRuntimeError  # noqa: E402
from hydra.core.hydra_config import HydraConfig  # noqa: E402
from hydra.types import RunMode  # noqa: E402
from omegaconf import DictConfig  # noqa: E402
from omegaconf.errors import OmegaConfBaseException  # noqa: E402

from experiments.config import ConfigError, register_resolvers  # noqa: E402
from experiments.datasets.base import DatasetUnavailableError  # noqa: E402
from experiments.models import ModelUnavailableError  # noqa: E402
from experiments.sweep import read_parent_run  # noqa: E402
from pipelines.builder import PipelineConfigError  # noqa: E402

# Mistakes in config or data: one clear line, no traceback (the MLflow run keeps the full one in error.txt).
USER_ERRORS = (
    ConfigError,
    PipelineConfigError,
    ModelUnavailableError,
    DatasetUnavailableError,
    PipelineRuntimeError,
    OmegaConfBaseException,
    ValueError,
    FileNotFoundError,
)


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def main(cfg: DictConfig) -> float:
    from experiments.runner import run_job

    for noisy in ("haystack", "sentence_transformers", "bm25s", "httpx"):  # their INFO lines drown the progress bars
        logging.getLogger(noisy).setLevel(logging.WARNING)
    hydra_cfg = HydraConfig.get()
    multirun = hydra_cfg.mode == RunMode.MULTIRUN
    overrides = hydra_cfg.job.override_dirname
    run_name = f"{cfg.pipeline.name}" + (f" [{overrides}]" if overrides else "")
    parent = read_parent_run(hydra_cfg.sweep.dir) if multirun else None
    try:
        result = run_job(cfg, Path(hydra_cfg.runtime.output_dir), run_name=run_name, parent=parent)
    except USER_ERRORS as e:
        if multirun:
            raise
        cause = f" ({type(e.__cause__).__name__}: {e.__cause__})" if isinstance(e, PipelineRuntimeError) else ""
        print(f"error: {e}{cause}", file=sys.stderr)
        sys.exit(2)
    return result.metrics.get("retrieval/mrr_at_10", 0.0)


if __name__ == "__main__":
    register_resolvers()
    main()
