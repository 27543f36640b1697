"""Issue 42, sections 3 and 4, checked where they fail before any work: the study's settings and space are refused
with one line and exit 2, an empty holdout part before indexing, a tiny one is warned about and its intervals are
marked as not meaningful, and an interrupted study keeps the trials that finished."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from experiments.datasets import load_dataset
from experiments.datasets.base import DatasetError
from experiments.evaluation.report import print_results
from experiments.tuning import optuna_study
from experiments.tuning.optuna_study import JobOutcome, run_study
from experiments.tuning.search_space import search_space
from hydra_plugins.ragtune_sweeper.optuna_sweeper import OptunaSweeper
from tests.support.paths import ROOT
from tests.support.run_py import write_local_dataset

OBJECTIVES = ["retrieval/mrr_at_10", "latency/p95_ms"]


@pytest.mark.parametrize(("settings", "arguments", "first_line"), [
    ({"n_trials": 0}, [], "error: config key 'hydra.sweeper.n_trials': must be a whole number of at least 1, got 0"),
    ({"n_trials": -3}, [], "error: config key 'hydra.sweeper.n_trials': must be a whole number of at least 1, got -3"),
    ({"batch_size": 0}, [], "error: config key 'hydra.sweeper.batch_size': must be a whole number of at least 1"),
    ({}, ["retriever.top_k=range(5,5,5)"], "error: hydra.sweeper.params.retriever.top_k: range(5, 5, 5) holds no value"),
    ({}, ["retriever.top_k=interval(50,5)"], "error: hydra.sweeper.params.retriever.top_k: interval(50.0, 5.0) is empty"),
    ({}, ["retriever.top_k=choice(5,10"], "error: hydra.sweeper.params: 'retriever.top_k=choice(5,10' does not parse"),
    ({"sampler": "annealing"}, [], "error: config key 'hydra.sweeper.sampler': 'annealing' is not one of"),
    ({"directions": ["maximize"]}, [], "error: config key 'hydra.sweeper.objectives': give one direction per objective"),
    ({}, ["dataset.holdout.use=all"], "error: config key 'dataset.holdout.use': an Optuna study sets it itself"),
    ({}, ["+dataset.holdout.use=test"], "error: config key 'dataset.holdout.use': an Optuna study sets it itself"),
    ({"holdout": False}, ["dataset.holdout.use=choice(dev,all)"], "error: config key 'dataset.holdout.use'"),
])
def test_the_study_refuses_its_mistakes_with_one_line_and_exit_2(tmp_path, capsys, settings, arguments, first_line):
    sweeper = OptunaSweeper(**{"n_trials": 2, "objectives": OBJECTIVES, "directions": ["maximize", "minimize"],
                               "params": {"retriever.top_k": "choice(5, 10)"}, "holdout": True} | settings)
    sweeper.config = OmegaConf.create({"hydra": {"sweep": {"dir": str(tmp_path / "sweep")}}})
    with pytest.raises(SystemExit) as exited:
        sweeper.sweep(arguments)
    assert exited.value.code == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(first_line)


def _one_question_set(tmp_path: Path) -> list[str]:
    overrides = write_local_dataset(tmp_path)
    golden = tmp_path / "golden.jsonl"
    golden.write_text(golden.read_text(encoding="utf-8").splitlines()[0] + "\n", encoding="utf-8")
    return overrides


def test_an_empty_holdout_part_is_refused_naming_the_sizes(tmp_path):
    _one_question_set(tmp_path)
    settings = {"kind": "local", "corpus_dir": str(tmp_path / "corpus"), "golden": str(tmp_path / "golden.jsonl"),
                "holdout": {"use": "test"}}
    with pytest.raises(DatasetError, match=r"^dataset.holdout.use=test: the test part is empty \(0 of the 1 "
                                           r"questions of .* at dataset.holdout.test_share=0.3\)"):
        load_dataset(settings, tmp_path)


def test_an_empty_holdout_part_exits_2_with_one_line_before_indexing(tmp_path):
    args = [sys.executable, str(ROOT / "run.py"), "pipeline=bm25", *_one_question_set(tmp_path),
            "dataset.holdout.use=test", f"paths.cache={tmp_path / 'cache'}",
            f"mlflow.tracking_uri=sqlite:///{tmp_path / 'mlflow.db'}", f"mlflow.artifact_root={tmp_path / 'artifacts'}"]
    result = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 2, result.stderr[-3000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert errors == [line for line in result.stderr.splitlines() if "dataset.holdout" in line]
    assert len(errors) == 1 and errors[0].startswith("error: dataset.holdout.use=test: the test part is empty (0 of")
    assert "Traceback" not in result.stderr and not list((tmp_path / "cache").glob("index/*"))


def test_a_tiny_holdout_part_is_warned_about(tmp_path, capsys):
    write_local_dataset(tmp_path)
    settings = {"kind": "local", "corpus_dir": str(tmp_path / "corpus"), "golden": str(tmp_path / "golden.jsonl"),
                "holdout": {"use": "dev"}}
    dataset = load_dataset(settings, tmp_path)
    assert len(dataset.golden) == 3
    assert (f"warning: dataset.holdout.use=dev: the part holds 3 of the 4 questions of {dataset.name} at "
            "dataset.holdout.test_share=0.3: CI not meaningful: 3 questions, fewer than 10") in capsys.readouterr().err


def test_the_printed_table_marks_intervals_over_few_questions_as_not_meaningful(capsys):
    metrics = {"eval/judged_questions": 1.0, "time/index_seconds": 0.1, "index/cache_hit": 0.0, "index/chunks": 3.0,
               "time/eval_seconds": 0.1, "latency/p50_ms": 1.0, "latency/p95_ms": 2.0, "context/recall": 1.0,
               "context/recall/ci95_low": 1.0, "context/recall/ci95_high": 1.0}
    dataset = OmegaConf.create({"name": "local", "language": "en"})
    print_results("bm25", dataset, metrics, [10])
    assert "CI not meaningful: 1 question, fewer than 10" in capsys.readouterr().out


def test_an_interrupted_study_keeps_the_trials_that_finished(tmp_path):
    """Control flow only: the second launch is interrupted (the real signal: test_study_interrupt.py)."""
    def launch(batch: list[list[str]], first: int) -> list[JobOutcome]:
        if first:
            raise KeyboardInterrupt
        folder = tmp_path / str(first)
        folder.mkdir()
        (folder / "metrics.json").write_text(json.dumps({OBJECTIVES[0]: 0.5, OBJECTIVES[1]: 9.0}))
        (folder / "run.json").write_text(json.dumps({}))
        return [JobOutcome(folder)]

    with pytest.raises(optuna_study.StudyInterrupted) as stopped:
        run_study(search_space({"retriever.top_k": "choice(5, 10)"}, []), OBJECTIVES, ["maximize", "minimize"], 3,
                  launch)
    assert stopped.value.exit_code == 130
    assert [t.values for t in stopped.value.result.trials] == [(0.5, 9.0)] and stopped.value.result.pareto
