"""MLflow plumbing: where runs go, how a config becomes params, and what identifies a run's code."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import mlflow
from mlflow.entities import Param
from mlflow.tracking import MlflowClient
from omegaconf import DictConfig, OmegaConf

PARAM_VALUE_LIMIT = 6000
BATCH = 100
SQLITE = "sqlite:///"


def tracking_uri(uri: str) -> str:
    """Makes a relative sqlite path absolute (against the cwd) and creates its folder."""
    if uri.startswith(SQLITE) and not uri.startswith(SQLITE + "/"):
        path = Path(uri[len(SQLITE) :]).resolve()
        path.parent.mkdir(parents=True, exist_ok=True)
        return f"{SQLITE}{path}"
    return uri


def use_experiment(mlflow_cfg: DictConfig | Mapping[str, Any], default_name: str) -> str:
    """Points MLflow at the configured store and returns the experiment id, creating it if needed."""
    mlflow.set_tracking_uri(tracking_uri(str(mlflow_cfg["tracking_uri"])))
    name = mlflow_cfg.get("experiment") or default_name
    client = MlflowClient()
    experiment = client.get_experiment_by_name(name)
    if experiment is not None:
        if experiment.lifecycle_stage == "deleted":  # deleted in the UI: runs cannot be logged until restored
            client.restore_experiment(experiment.experiment_id)
        return experiment.experiment_id
    root = mlflow_cfg.get("artifact_root")
    location = (Path(root).resolve() / name).as_uri() if root else None
    try:
        return client.create_experiment(name, artifact_location=location)
    except mlflow.exceptions.MlflowException:  # a parallel sweep job created it first
        return client.get_experiment_by_name(name).experiment_id


def flatten(value: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(value, Mapping):
        for key, item in value.items():
            yield from flatten(item, f"{prefix}.{key}" if prefix else str(key))
    else:
        yield prefix, value


def log_config_params(run_id: str, cfg: DictConfig) -> None:
    """The flattened resolved config as params (batched; long values are cut to MLflow's limit)."""
    container = OmegaConf.to_container(cfg, resolve=True)
    params = [Param(key, str(value)[:PARAM_VALUE_LIMIT]) for key, value in flatten(container)]
    client = MlflowClient()
    for start in range(0, len(params), BATCH):
        client.log_batch(run_id, params=params[start : start + BATCH])


def git_commit(cwd: Path | None = None) -> str:
    """HEAD, marked '-dirty' when tracked files differ from it; 'unknown' outside a git checkout."""
    try:
        commit = _git(["rev-parse", "HEAD"], cwd)
        dirty = _git(["status", "--porcelain", "--untracked-files=no"], cwd)
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{commit}-dirty" if dirty else commit


def _git(args: list[str], cwd: Path | None) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()
