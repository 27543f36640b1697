"""One MLflow parent run per Hydra sweep; every job of the sweep becomes its child.

The launcher process opens the parent run before the jobs start and writes its id into the sweep folder, where each
job (in this process or a joblib worker) finds it. When the sweep ends, the parent gets the comparison table and
bar chart, and is closed.
"""

from __future__ import annotations

import atexit
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from mlflow.tracking import MlflowClient
from omegaconf import DictConfig

from experiments.tracking import git_commit, use_experiment

PARENT_FILE = "mlflow_parent_run.json"
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ParentRun:
    run_id: str
    experiment_id: str


def read_parent_run(sweep_dir: str | Path) -> ParentRun | None:
    """The sweep's parent run; its children log into the parent's experiment so the sweep stays one group."""
    path = Path(sweep_dir) / PARENT_FILE
    return ParentRun(**json.loads(path.read_text())) if path.exists() else None


class SweepParentRun(Callback):
    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        experiment_id = use_experiment(config.mlflow, config.mlflow.experiment or config.dataset.name)
        sweep_dir = Path(config.hydra.sweep.dir)
        overrides = " ".join(config.hydra.overrides.task)
        run = MlflowClient().create_run(
            experiment_id,
            run_name=f"sweep {overrides}".strip(),
            tags={"ragtune.sweep_dir": str(sweep_dir.resolve()), "ragtune.git_commit": git_commit(Path.cwd())},
        )
        sweep_dir.mkdir(parents=True, exist_ok=True)
        (sweep_dir / PARENT_FILE).write_text(json.dumps({"run_id": run.info.run_id, "experiment_id": experiment_id}))
        log.info("MLflow parent run %s for sweep %s", run.info.run_id, sweep_dir)
        atexit.register(_fail_if_running, run.info.run_id)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        from experiments.compare import child_runs, report_sweep

        sweep_dir = Path(config.hydra.sweep.dir)
        parent = read_parent_run(sweep_dir)
        if parent is None:
            return
        client = MlflowClient()
        try:
            report_sweep(parent.run_id, sweep_dir / "comparison.png")
        finally:
            failed = any(r.info.status != "FINISHED" for r in child_runs(client, parent.run_id))
            client.set_terminated(parent.run_id, status="FAILED" if failed else "FINISHED")


def _fail_if_running(run_id: str) -> None:
    """A sweep that died (a job raised) skips on_multirun_end; its parent must not stay RUNNING."""
    client = MlflowClient()
    if client.get_run(run_id).info.status == "RUNNING":
        client.set_terminated(run_id, status="FAILED")
