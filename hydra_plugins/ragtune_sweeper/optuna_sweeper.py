"""`python run.py -m hydra/sweeper=optuna`: Hydra finds sweepers only in the `hydra_plugins` namespace, so this
thin class lives here and the study itself in experiments/tuning/ (optuna_study.py, search_space.py).

A mistake in the study's settings or space exits 2 with one line; a trial whose overrides do not compose is a failed
trial (as a job that fails is), not the end of the study; SIGINT or SIGTERM ends the parent run KILLED with exit
130/143 after the tables of the finished trials are written."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra.core.utils import JobReturn, JobStatus
from hydra.errors import HydraException
from hydra.plugins.launcher import Launcher
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from mlflow.tracking import MlflowClient
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from pipelines.errors import UserError
from pipelines.run_layout import ERROR_TAG, INTERRUPTED_TAG, STUDY_PART_TAG, TEST_CHECKED_TAG


class OptunaSweeper(Sweeper):
    def __init__(
        self,
        n_trials: int,
        objectives: list[str],
        directions: list[str],
        params: dict[str, str] | None = None,
        sampler: str = "tpe",
        seed: int = 0,
        batch_size: int = 1,
        holdout: bool = False,
        tolerate_failed_jobs: bool = True,  # read from the config by experiments/runs/sweep_parent_run.py
    ) -> None:
        self.n_trials, self.seed, self.sampler, self.batch_size, self.holdout = n_trials, seed, sampler, batch_size, holdout
        self.objectives, self.directions = list(objectives), list(directions)
        self.params = dict(params or {})
        self.config: DictConfig | None = None
        self.launcher: Launcher | None = None
        self.hydra_context: HydraContext | None = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        from hydra.core.plugins import Plugins

        self.config, self.hydra_context = config, hydra_context
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=task_function, config=config
        )

    def sweep(self, arguments: list[str]) -> Any:
        from experiments.runs.sweep import read_parent_run
        from experiments.tuning.optuna_study import StudyInterrupted, print_study, run_study
        from experiments.tuning.search_space import search_space
        from experiments.tuning.study_report import report_study

        assert self.config is not None
        sweep_dir = Path(self.config.hydra.sweep.dir)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(self.config, sweep_dir / "multirun.yaml")
        parent = read_parent_run(sweep_dir)
        parent_id = parent.run_id if parent else None
        try:
            space = search_space(self.params, arguments)
            result = run_study(space, self.objectives, self.directions, self.n_trials, self._launch, self.seed,
                               self.sampler, self.batch_size, self.holdout)
        except UserError as e:  # before any trial ran: the study's settings or space
            print(f"error: {e}", file=sys.stderr)
            _end_parent(parent_id, "FAILED", {ERROR_TAG: f"{type(e).__name__}: {e}"[:5000]})
            sys.exit(2)
        except StudyInterrupted as stop:
            report_study(stop.result, sweep_dir, parent_id)
            print_study(stop.result)
            print(f"interrupted: the study stopped after {len(stop.result.trials)} trials; their tables are in "
                  f"{sweep_dir}; the MLflow parent run ends KILLED", file=sys.stderr)
            _end_parent(parent_id, "KILLED", {INTERRUPTED_TAG: f"after {len(stop.result.trials)} trials"})
            sys.exit(stop.exit_code)
        report_study(result, sweep_dir, parent_id)
        _tag_test_checked(result)
        print_study(result)
        return result

    def _launch(self, batch: list[list[str]], first: int) -> list[Any]:
        """The batch's jobs, each run of composable ones launched together; a job whose overrides do not compose
        (`reranker=nonexistent`, `retriever.top_k=abc`) is a failed trial with a FAILED child run naming why."""
        assert self.launcher is not None
        errors = [self._compose_error(overrides) for overrides in batch]
        outcomes: list[Any] = [None] * len(batch)
        start = 0
        while start < len(batch):
            end = start
            while end < len(batch) and (errors[end] is None) == (errors[start] is None):
                end += 1
            if errors[start] is None:
                launched = self.launcher.launch(batch[start:end], initial_job_idx=first + start)
                outcomes[start:end] = [_outcome(job) for job in launched]
            else:
                outcomes[start:end] = [self._failed(batch[i], first + i, errors[i]) for i in range(start, end)]
            start = end
        _tag_parts(batch, outcomes)
        return outcomes

    def _compose_error(self, overrides: list[str]) -> BaseException | None:
        assert self.hydra_context is not None and self.config is not None
        try:
            self.hydra_context.config_loader.load_sweep_config(self.config, list(overrides))
        except (HydraException, OmegaConfBaseException) as e:
            return e
        return None

    def _failed(self, overrides: list[str], job_num: int, error: BaseException) -> Any:
        """The failed trial's outcome, and its FAILED child run, as run.py records a job that failed early."""
        from experiments.runs.sweep import job_tags, read_parent_run, record_failed_job
        from experiments.tuning.optuna_study import JobOutcome

        assert self.config is not None
        message = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
        print(f"error: trial {job_num}: its overrides do not compose: {message}", file=sys.stderr)
        parent = read_parent_run(self.config.hydra.sweep.dir)
        if parent is not None:
            record_failed_job(parent, " ".join(overrides), job_tags(job_num, overrides), error)
        return JobOutcome(None, message)


def _tag_parts(batch: Sequence[list[str]], outcomes: Sequence[Any]) -> None:
    """Each trial's run says what it was tuned on, so that promotion can tell a dev trial (which needs a test
    re-check) and a trial of a study without a test part (which never gets one) from a plain run."""
    from experiments.tuning.optuna_study import DEV, TEST, job_run_id

    for overrides, outcome in zip(batch, outcomes, strict=True):
        run_id = job_run_id(outcome.job_dir)
        if run_id is not None and TEST not in overrides:
            MlflowClient().set_tag(run_id, STUDY_PART_TAG, "dev" if DEV in overrides else "all")


def _tag_test_checked(result: Any) -> None:
    """A dev trial whose configuration finished on the test part is tagged with that run; no other trial is."""
    from experiments.tuning.optuna_study import job_run_id

    by_label = {f"trial {t.number}": t for t in result.pareto}
    for check in result.test_checks:
        trial = by_label.get(check.label)
        if trial is None or check.test is None or check.run_id is None:
            continue
        if (run_id := job_run_id(trial.job_dir)) is not None:
            MlflowClient().set_tag(run_id, TEST_CHECKED_TAG, check.run_id)


def _end_parent(run_id: str | None, status: str, tags: dict[str, str]) -> None:
    """The parent run ends here: on_multirun_end does not run after an exit from the sweep."""
    if run_id is None:
        return
    client = MlflowClient()
    for key, value in tags.items():
        client.set_tag(run_id, key, value)
    client.set_terminated(run_id, status=status)


def _outcome(job: JobReturn) -> Any:
    from experiments.tuning.optuna_study import JobOutcome

    folder = job.hydra_cfg.hydra.runtime.output_dir if job.hydra_cfg is not None else None
    error = None if job.status == JobStatus.COMPLETED else f"{type(job._return_value).__name__}: {job._return_value}"
    return JobOutcome(Path(folder) if folder else None, error)
