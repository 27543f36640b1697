"""Hydra entry point: `python run.py pipeline=hybrid retriever.top_k=50`, or `-m` for a sweep.

Exit codes: 0 done; 2 a mistake in config, data, models or environment (one line on stderr, no traceback);
1 a bug (traceback) or, after a sweep, at least one failed job; 130/143 interrupted by SIGINT/SIGTERM (the MLflow
run ends KILLED). Hydra's own errors (an unknown config group or a malformed override) exit 1 before any work.
"""

from __future__ import annotations

import logging
import signal
import sys
import traceback
from pathlib import Path

from experiments.runs.process import quiet_libraries, set_env_defaults

set_env_defaults()

import hydra  # noqa: E402
from haystack.core.errors import PipelineRuntimeError  # noqa: E402
from hydra.core.hydra_config import HydraConfig  # noqa: E402
from hydra.types import RunMode  # noqa: E402
from omegaconf import DictConfig  # noqa: E402
from omegaconf.errors import OmegaConfBaseException  # noqa: E402

from experiments.runs import interrupts  # noqa: E402
from experiments.runs.config import register_config  # noqa: E402
from experiments.runs.interrupts import Interrupted  # noqa: E402
from experiments.runs.sweep import read_parent_run, record_failed_job  # noqa: E402
from pipelines.errors import UserError  # noqa: E402

EXIT_BUG, EXIT_USER_ERROR = 1, 2
EXIT_SIGNAL = {signal.SIGINT: 130, signal.SIGTERM: 143}


def user_error(e: BaseException) -> UserError | OmegaConfBaseException | None:
    """Our typed errors (also when a component raised one inside the pipeline); anything else is a bug."""
    if isinstance(e, UserError | OmegaConfBaseException):
        return e
    if isinstance(e, PipelineRuntimeError) and isinstance(e.__cause__, UserError):
        return e.__cause__
    return None


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def main(cfg: DictConfig) -> float:
    from experiments.runs.runner import job_identity, run_job

    for noisy in ("haystack", "sentence_transformers", "bm25s", "httpx", "mlflow"):  # their INFO lines drown the bars
        logging.getLogger(noisy).setLevel(logging.WARNING)
    hydra_cfg = HydraConfig.get()
    multirun = hydra_cfg.mode == RunMode.MULTIRUN
    parent = read_parent_run(hydra_cfg.sweep.dir) if multirun else None
    overrides = list(hydra_cfg.overrides.task)
    identity = (
        job_identity(cfg, overrides, hydra_cfg.job.num, parent.swept) if parent else job_identity(cfg, overrides)
    )
    try:
        return run_job(cfg, Path(hydra_cfg.runtime.output_dir), identity, parent=parent).objective
    except KeyboardInterrupt as e:
        signum = e.signum if isinstance(e, Interrupted) else signal.SIGINT
        print(f"interrupted by {signal.Signals(signum).name}; the MLflow run ends KILLED", file=sys.stderr)
        sys.exit(EXIT_SIGNAL[signum])
    except Exception as e:
        mistake = user_error(e)
        if mistake is None:
            traceback.print_exc()
        else:
            print(f"error: {mistake}", file=sys.stderr)
        if parent is None:
            sys.exit(EXIT_BUG if mistake is None else EXIT_USER_ERROR)
        record_failed_job(parent, identity.run_name, identity.tags, e)  # the sweep goes on and names it at the end
        return float("nan")


if __name__ == "__main__":
    from experiments.runs.sweep import failed_jobs

    quiet_libraries()
    interrupts.install(signal.SIGTERM, signal.SIGINT)
    register_config()
    main()
    sys.exit(EXIT_BUG if failed_jobs() else 0)
