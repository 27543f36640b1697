"""The Hydra callback that opens a sweep's MLflow parent run before the jobs and closes it after them.

It is the one place where a sweep meets comparison: the finished children are compared on the parent (table, bar
chart, paired tests against the baseline) before it closes, so it sits apart from sweep.py, which the jobs import.
"""

from __future__ import annotations

import atexit
import json
import logging
from dataclasses import asdict
from pathlib import Path
from typing import Any

import mlflow
from hydra.experimental.callback import Callback
from mlflow.tracking import MlflowClient
from omegaconf import DictConfig, OmegaConf

from experiments.comparison.compare import report_sweep
from experiments.runs.sweep import (
    BASELINE_KEY,
    ParentRun,
    child_runs,
    read_parent_run,
    report_failures,
    swept_keys,
)
from experiments.runs.tracking import experiment_name, run_tags, source_tags, use_experiment
from pipelines.run_layout import COMPARISON_CHART, PARENT_FILE, SWEEP_DIR_TAG

log = logging.getLogger(__name__)
# A sweeper whose config sets this (the Optuna search) counts failed jobs as part of its search: exit 0.
TOLERATE_KEY = "hydra.sweeper.tolerate_failed_jobs"


class SweepParentRun(Callback):
    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        experiment_id = use_experiment(config.mlflow, experiment_name(config))
        sweep_dir = Path(config.hydra.sweep.dir)
        overrides = " ".join(config.hydra.overrides.task)
        run = MlflowClient().create_run(
            experiment_id,
            run_name=f"sweep {overrides}".strip(),
            tags={SWEEP_DIR_TAG: str(sweep_dir.resolve())} | source_tags() | run_tags(),
        )
        parent = ParentRun(run.info.run_id, experiment_id, mlflow.get_tracking_uri(), swept_keys(config))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        (sweep_dir / PARENT_FILE).write_text(json.dumps(asdict(parent)))
        log.info("MLflow parent run %s for sweep %s", run.info.run_id, sweep_dir)
        atexit.register(_fail_if_running, run.info.run_id)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        sweep_dir = Path(config.hydra.sweep.dir)
        parent = read_parent_run(sweep_dir)
        if parent is None:
            return
        client = MlflowClient()
        children = child_runs(client, parent.run_id)
        finished = any(run.info.status == "FINISHED" for run in children)
        try:
            if finished:
                baseline = OmegaConf.select(config, BASELINE_KEY)
                report_sweep(parent.run_id, sweep_dir / COMPARISON_CHART, baseline=baseline)
        finally:
            search = finished and bool(OmegaConf.select(config, TOLERATE_KEY, default=False))
            report_failures(client, parent.run_id, children, search)
            client.set_terminated(parent.run_id, status="FINISHED" if finished else "FAILED")


def _fail_if_running(run_id: str) -> None:
    """A sweep that died (the launcher raised) skips on_multirun_end; its parent must not stay RUNNING."""
    client = MlflowClient()
    if client.get_run(run_id).info.status == "RUNNING":
        client.set_terminated(run_id, status="FAILED")
