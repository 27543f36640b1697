"""`python run.py -m hydra/sweeper=optuna`: Hydra finds sweepers only in the `hydra_plugins` namespace, so this
thin class lives here and the study itself in experiments/tuning/ (optuna_study.py, search_space.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hydra.core.utils import JobReturn, JobStatus
from hydra.plugins.launcher import Launcher
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf


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

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        from hydra.core.plugins import Plugins

        self.config = config
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=task_function, config=config
        )

    def sweep(self, arguments: list[str]) -> Any:
        from experiments.runs.sweep import read_parent_run
        from experiments.tuning.optuna_study import JobOutcome, print_study, run_study
        from experiments.tuning.search_space import search_space
        from experiments.tuning.study_report import report_study

        assert self.config is not None and self.launcher is not None
        sweep_dir = Path(self.config.hydra.sweep.dir)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(self.config, sweep_dir / "multirun.yaml")
        launcher = self.launcher

        def launch(batch: list[list[str]], first: int) -> list[JobOutcome]:
            return [_outcome(job) for job in launcher.launch(batch, initial_job_idx=first)]

        space = search_space(self.params, arguments)
        result = run_study(space, self.objectives, self.directions, self.n_trials, launch, self.seed, self.sampler,
                           self.batch_size, self.holdout)
        parent = read_parent_run(sweep_dir)
        report_study(result, sweep_dir, parent.run_id if parent else None)
        print_study(result)
        return result


def _outcome(job: JobReturn) -> Any:
    from experiments.tuning.optuna_study import JobOutcome

    folder = job.hydra_cfg.hydra.runtime.output_dir if job.hydra_cfg is not None else None
    error = None if job.status == JobStatus.COMPLETED else f"{type(job._return_value).__name__}: {job._return_value}"
    return JobOutcome(Path(folder) if folder else None, error)
