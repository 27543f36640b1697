"""Issue 42, sections 3 and 4, through run.py as a user runs it: an Optuna study interrupted by a real SIGINT, in a
trial or between two, ends its MLflow parent KILLED with exit 130 and still writes the tables of the trials that
finished; a trial whose overrides do not compose is a failed trial; the study owns dataset.holdout.use.

The signal is sent when the study reaches a point it announces with a file (a reranker holding in the second job,
or a Hydra callback holding before it), never after a fixed sleep."""

from __future__ import annotations

import csv
import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from haystack import Document, component
from hydra.core.hydra_config import HydraConfig
from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from tests.support.paths import ROOT
from tests.support.run_py import client, write_local_dataset

HOLD_SECONDS = 120  # a hold that no signal ends lets the study go on, and the test fails on its exit code


def _hold(marker: str) -> None:
    """Announces the hold with `marker`, then waits for the signal the test sends."""
    Path(marker).write_text("holding", encoding="utf-8")
    deadline = time.monotonic() + HOLD_SECONDS
    while time.monotonic() < deadline:
        time.sleep(0.05)


@component
class HoldInSecondJob:
    """A reranker that passes its documents on, and in the study's second job (a trial) holds for the signal."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    @component.output_types(documents=list[Document])
    def run(self, query: str, documents: list[Document]) -> dict[str, list[Document]]:
        if HydraConfig.get().job.num == 1:
            _hold(self.marker)
        return {"documents": documents}


class HoldBeforeSecondJob(Callback):
    """Holds for the signal after the first trial was told to the study and before the second job starts."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        if config.hydra.job.num == 1:
            _hold(self.marker)


def _study(tmp_path: Path, *overrides: str) -> list[str]:
    return [sys.executable, str(ROOT / "run.py"), "-m", "hydra/sweeper=optuna", "hydra.sweeper.batch_size=1",
            "~hydra.sweeper.params", "pipeline=bm25", "retriever.top_k=choice(5,10)", *write_local_dataset(tmp_path),
            "eval.trace_sample=0", f"paths.cache={tmp_path / 'cache'}",
            f"mlflow.tracking_uri=sqlite:///{tmp_path / 'mlflow.db'}", f"mlflow.artifact_root={tmp_path / 'artifacts'}",
            f"hydra.sweep.dir={tmp_path / 'sweep'}", *overrides]


def _interrupted(tmp_path: Path, *overrides: str) -> tuple[int, str]:
    marker = tmp_path / "holding"
    args = _study(tmp_path, "hydra.sweeper.n_trials=3", "hydra.sweeper.sampler=grid", "hydra.sweeper.holdout=false",
                  *(o.replace("MARKER", str(marker)) for o in overrides))
    process = subprocess.Popen(args, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    while not marker.exists() and process.poll() is None:
        time.sleep(0.1)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=300)
    return process.returncode, err


def _parent(tmp_path: Path) -> Any:
    parent_id = json.loads((tmp_path / "sweep" / "mlflow_parent_run.json").read_text())["run_id"]
    return client(tmp_path).get_run(parent_id)


def _trials(tmp_path: Path) -> list[dict[str, str]]:
    with (tmp_path / "sweep" / "optuna_trials.csv").open(encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _assert_killed_with_the_finished_trial(tmp_path: Path, code: int, err: str) -> None:
    assert code == 130, err[-3000:]
    assert "interrupted: the study stopped after 1 trials" in err and "Traceback" not in err
    assert [row["state"] for row in _trials(tmp_path)] == ["complete"]
    parent = _parent(tmp_path)
    assert parent.info.status == "KILLED"
    assert parent.data.metrics["optuna/trials"] == 1


@pytest.mark.slow
def test_sigint_during_a_trial_ends_the_study_killed_with_the_finished_trials_written(tmp_path):
    component = "reranker.component={_target_: tests.adversarial.test_study_interrupt.HoldInSecondJob, marker: MARKER}"
    code, err = _interrupted(tmp_path, component)
    _assert_killed_with_the_finished_trial(tmp_path, code, err)
    # A study without a test part: its trials are tagged as tuned on every question and never as test-checked.
    children = [r for r in client(tmp_path).search_runs([_parent(tmp_path).info.experiment_id])
                if r.data.tags.get("mlflow.parentRunId")]
    finished = [r for r in children if r.info.status == "FINISHED"]
    assert finished and all(r.data.tags.get("ragtune.study.tuned_on") == "all" for r in finished)
    assert not any("ragtune.study.test_checked" in r.data.tags for r in children)
    assert [r.info.status for r in children if r.info.status != "FINISHED"] == ["KILLED"]


@pytest.mark.slow
def test_sigint_between_trials_ends_the_study_killed_with_the_finished_trials_written(tmp_path):
    code, err = _interrupted(tmp_path, "+hydra.callbacks.hold._target_=tests.adversarial.test_study_interrupt."
                             "HoldBeforeSecondJob", "+hydra.callbacks.hold.marker=MARKER")
    _assert_killed_with_the_finished_trial(tmp_path, code, err)


@pytest.mark.slow
@pytest.mark.parametrize(("key", "good", "bad"), [("retriever.top_k", "5", "abc"), ("reranker", "none", "nonexistent")])
def test_a_trial_whose_overrides_do_not_compose_is_a_failed_trial_and_the_study_goes_on(tmp_path, key, good, bad):
    result = subprocess.run(_study(tmp_path, "hydra.sweeper.n_trials=2", "hydra.sweeper.sampler=grid",
                                   "retriever.top_k=5", f"{key}=choice({good},{bad})"),  # a space of two points
                            cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    trials = {row[f"param {key}"]: row for row in _trials(tmp_path)}
    assert trials[good]["state"] == "complete" and trials[bad]["state"] == "failed"
    assert bad in trials[bad]["error"]
    parent = _parent(tmp_path)
    assert parent.info.status == "FINISHED" and parent.data.metrics["optuna/failed_trials"] == 1
    children = [r for r in client(tmp_path).search_runs([parent.info.experiment_id])
                if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    failed = [r for r in children if r.info.status == "FAILED"]
    assert len(failed) == 1 and bad in failed[0].data.tags["ragtune.error"]
    # The 1-question test part's intervals are marked as not meaningful: printed, in the table, on the runs.
    assert "(CI not meaningful: 1 question, fewer than 10)" in result.stderr
    with (tmp_path / "sweep" / "optuna_test.csv").open(encoding="utf-8") as f:
        assert all(row["ci_note"].startswith("CI not meaningful") for row in csv.DictReader(f))
    assert parent.data.tags["ragtune.ci"].startswith("test default: CI not meaningful")
    trial = next(r for r in children if r.data.tags.get("ragtune.study.tuned_on") == "dev")
    assert trial.data.tags["ragtune.ci"].startswith("CI not meaningful: ")
    assert trial.data.tags["ragtune.study.test_checked"] in {r.info.run_id for r in children}


def test_a_holdout_override_on_the_command_line_is_refused_before_any_trial(tmp_path):
    result = subprocess.run(_study(tmp_path, "hydra.sweeper.n_trials=2", "dataset.holdout.use=all"),
                            cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 2
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert errors == [line for line in result.stderr.splitlines() if "dataset.holdout.use" in line]
    assert len(errors) == 1 and errors[0].startswith("error: config key 'dataset.holdout.use': an Optuna study sets")
    assert "Traceback" not in result.stderr and not (tmp_path / "sweep" / "0").exists()
    assert _parent(tmp_path).info.status == "FAILED"
