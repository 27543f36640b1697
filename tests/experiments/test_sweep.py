"""The end of a sweep on real MLflow runs (sqlite): failed jobs named, parent status, baseline choice, run labels."""

import json
import shutil

import mlflow
import pandas as pd
import pytest
from mlflow.tracking import MlflowClient
from omegaconf import OmegaConf

from experiments.runs.sweep import (
    ParentRun,
    child_runs,
    failed_jobs,
    job_tags,
    pick_baseline,
    record_failed_job,
    run_labels,
    short_labels,
)
from experiments.runs.sweep_parent_run import SweepParentRun
from pipelines.run_layout import BASELINE_TAG, ERROR_TAG, FAILED_JOBS_TAG, JOB_NUM_TAG, PARENT_FILE
from tests.support.mlflow_runs import logged_run, questions

LOCAL = [
    "dataset=local",
    "dataset.corpus_dir=/home/alice/projects/acme/kb/exports/2024-06/docs",
    "dataset.golden=/home/alice/projects/acme/kb/exports/2024-06/golden.jsonl",
]


@pytest.fixture(scope="module")
def empty_store(tmp_path_factory):
    """An initialised sqlite store; a copy per test spares each test MLflow's schema migrations (~10 s)."""
    db = tmp_path_factory.mktemp("store") / "mlflow.db"
    MlflowClient(f"sqlite:///{db}").search_experiments()
    return db


@pytest.fixture
def sweep(tmp_path, empty_store):
    """A parent run and its sweep folder, as SweepParentRun.on_multirun_start leaves them."""
    shutil.copy(empty_store, tmp_path / "mlflow.db")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    mlflow.set_tracking_uri(uri)
    client = MlflowClient()
    experiment = client.create_experiment("demo", artifact_location=(tmp_path / "artifacts").as_uri())
    parent = client.create_run(experiment, run_name="sweep").info.run_id
    sweep_dir = tmp_path / "sweep"
    sweep_dir.mkdir()
    (sweep_dir / PARENT_FILE).write_text(json.dumps({"run_id": parent, "experiment_id": experiment, "tracking_uri": uri}))
    return client, experiment, parent, sweep_dir


def finished_job(sweep, tmp_path, job_num: int, pipeline: str, f1: float = 0.5) -> str:
    client, experiment, parent, _ = sweep
    run_id = logged_run(client, experiment, pipeline, questions(10, f1=f1, recall=0.8), tmp_path, parent=parent)
    for key, value in job_tags(job_num, [*LOCAL, f"pipeline={pipeline}"]).items():
        client.set_tag(run_id, key, value)
    return run_id


def failed_job(sweep, job_num: int, pipeline: str, error: str | None, status: str = "FAILED") -> str:
    client, experiment, parent, _ = sweep
    tags = {"mlflow.parentRunId": parent, **job_tags(job_num, [*LOCAL, f"pipeline={pipeline}"])}
    run_id = client.create_run(experiment, run_name=pipeline, tags=tags | ({ERROR_TAG: error} if error else {})).info.run_id
    client.set_terminated(run_id, status=status)
    return run_id


def end_sweep(sweep_dir, baseline: str | None = None) -> None:
    config = {"hydra": {"sweep": {"dir": str(sweep_dir)}}} | ({"compare": {"baseline": baseline}} if baseline else {})
    SweepParentRun().on_multirun_end(OmegaConf.create(config))


def test_one_failed_job_is_named_and_the_sweep_still_finishes(sweep, tmp_path, capsys):
    client, _, parent, sweep_dir = sweep
    finished_job(sweep, tmp_path, 0, "bm25")
    bad = failed_job(sweep, 1, "hybrid", "ConfigError: config key 'retriever.top_k': must be > 0")
    end_sweep(sweep_dir)
    summary = f"1 of 2 sweep jobs failed:\n  hybrid: ConfigError: config key 'retriever.top_k': must be > 0 (run {bad})\n"
    assert summary in capsys.readouterr().err
    run = client.get_run(parent)
    assert (run.info.status, run.data.tags[FAILED_JOBS_TAG], run.data.tags[BASELINE_TAG]) == ("FINISHED", "1", "bm25")
    assert mlflow.artifacts.load_text(f"runs:/{parent}/failed_jobs.txt") == summary
    assert failed_jobs() == ["hybrid"]
    assert pd.read_csv(sweep_dir / "comparison.csv")["run"].tolist() == ["bm25"]  # only finished jobs are compared


def test_a_sweep_where_no_job_finished_fails_and_names_them_all(sweep, capsys):
    client, _, parent, sweep_dir = sweep
    bm25 = failed_job(sweep, 0, "bm25", "DatasetUnavailableError: no file golden.jsonl")
    hybrid = failed_job(sweep, 1, "hybrid", None, status="KILLED")
    end_sweep(sweep_dir)
    assert capsys.readouterr().err.endswith(
        f"2 of 2 sweep jobs failed:\n  bm25: DatasetUnavailableError: no file golden.jsonl (run {bm25})\n"
        f"  hybrid: no error recorded, run KILLED (run {hybrid})\n"
    )
    run = client.get_run(parent)
    assert (run.info.status, run.data.tags[FAILED_JOBS_TAG]) == ("FAILED", "2")
    assert failed_jobs() == ["bm25", "hybrid"]
    assert {a.path for a in client.list_artifacts(parent)} == {"failed_jobs.txt"}
    assert not (sweep_dir / "comparison.png").exists()


def test_a_sweep_without_failures_tags_zero_and_forgets_earlier_failures(sweep, tmp_path):
    client, _, parent, sweep_dir = sweep
    finished_job(sweep, tmp_path, 0, "bm25")
    end_sweep(sweep_dir)
    assert client.get_run(parent).data.tags[FAILED_JOBS_TAG] == "0"
    assert failed_jobs() == []
    assert "failed_jobs.txt" not in {a.path for a in client.list_artifacts(parent)}


def test_the_named_baseline_is_the_one_every_job_is_tested_against(sweep, tmp_path):
    client, _, parent, sweep_dir = sweep
    bm25 = finished_job(sweep, tmp_path, 0, "bm25", f1=0.5)
    dense = finished_job(sweep, tmp_path, 1, "dense", f1=0.6)
    hybrid = finished_job(sweep, tmp_path, 2, "hybrid", f1=0.7)
    end_sweep(sweep_dir, baseline="pipeline=hybrid")
    assert client.get_run(parent).data.tags[BASELINE_TAG] == "hybrid"
    paired = {a.path for a in client.list_artifacts(parent, "compare")}
    stems = [f"compare/paired_{run[:8]}_vs_{hybrid[:8]}" for run in (bm25, dense)]
    assert paired == {stem + ext for stem in stems for ext in (".csv", ".png")}
    frame = pd.read_csv(sweep_dir / f"{stems[0].removeprefix('compare/')}.csv", index_col="metric")
    assert frame.loc["answer/f1", "diff"] == pytest.approx(-0.2)  # bm25 minus hybrid


def test_a_failed_baseline_falls_back_to_the_first_finished_job_and_says_so(sweep, tmp_path, capsys):
    client, _, parent, sweep_dir = sweep
    failed_job(sweep, 0, "bm25", "FileNotFoundError: /data/bm25.idx")
    dense = finished_job(sweep, tmp_path, 1, "dense")
    hybrid = finished_job(sweep, tmp_path, 2, "hybrid")
    end_sweep(sweep_dir, baseline="pipeline=bm25")
    assert (
        "warning: compare.baseline=pipeline=bm25: that job failed (FileNotFoundError: /data/bm25.idx); "
        "baseline is the first finished job instead: dense\n"
    ) in capsys.readouterr().err
    assert client.get_run(parent).data.tags[BASELINE_TAG] == "dense"
    assert {a.path for a in client.list_artifacts(parent, "compare")} == {
        f"compare/paired_{hybrid[:8]}_vs_{dense[:8]}.csv",
        f"compare/paired_{hybrid[:8]}_vs_{dense[:8]}.png",
    }


def test_children_come_in_override_order_not_in_the_order_they_finished(sweep, tmp_path):
    client, _, parent, _ = sweep
    hybrid = finished_job(sweep, tmp_path, 1, "hybrid")  # job 1 started and finished first
    bm25 = finished_job(sweep, tmp_path, 0, "bm25")
    children = child_runs(client, parent)
    assert [run.info.run_id for run in children] == [bm25, hybrid]
    choice = pick_baseline(children, None)
    assert (choice.run.info.run_id, choice.note, choice.fallback) == (
        bm25, "baseline: bm25 (the first finished job in override order)", False
    )


def test_a_baseline_no_job_has_names_the_jobs_there_are(sweep, tmp_path):
    client, _, parent, _ = sweep
    bm25 = finished_job(sweep, tmp_path, 0, "bm25")
    finished_job(sweep, tmp_path, 1, "hybrid")
    choice = pick_baseline(child_runs(client, parent), "pipeline=dense")
    assert (choice.run.info.run_id, choice.fallback) == (bm25, True)
    assert choice.note == (
        "compare.baseline=pipeline=dense: no job of the sweep has that override (jobs: bm25, hybrid); "
        "baseline is the first finished job instead: bm25"
    )
    assert pick_baseline([], "pipeline=dense") is None


def test_a_job_that_failed_before_its_run_opened_gets_one_failed_child(sweep):
    client, _, parent, sweep_dir = sweep
    parent_run = ParentRun(**json.loads((sweep_dir / PARENT_FILE).read_text()))
    tags = job_tags(3, [*LOCAL, "pipeline=dense"])
    try:
        raise ValueError("retriever.top_k must be positive")
    except ValueError as e:
        first = record_failed_job(parent_run, "dense", tags, e)
        again = record_failed_job(parent_run, "dense", tags, e)
    assert again == first
    [child] = child_runs(client, parent)
    assert (child.info.run_id, child.info.status, child.data.tags[JOB_NUM_TAG]) == (first, "FAILED", "3")
    assert child.data.tags[ERROR_TAG] == "ValueError: retriever.top_k must be positive"
    error_txt = mlflow.artifacts.load_text(f"runs:/{first}/error.txt")
    assert error_txt.startswith("Traceback") and error_txt.endswith("ValueError: retriever.top_k must be positive\n")
    assert run_labels([child]) == ["local corpus_dir=docs golden=golden.jsonl dense"]


@pytest.mark.parametrize(
    ("overrides", "labels"),
    [
        pytest.param([[*LOCAL, "pipeline=bm25"], [*LOCAL, "pipeline=hybrid"]], ["bm25", "hybrid"], id="paths-not-swept"),
        pytest.param(
            [[*LOCAL, f"pipeline={p}", f"retriever.top_k={k}"] for p in ("bm25", "hybrid") for k in (5, 20)],
            ["bm25 top_k=5", "bm25 top_k=20", "hybrid top_k=5", "hybrid top_k=20"],
            id="two-swept-keys",
        ),
        pytest.param(
            [["dataset.corpus_dir=/data/acme/en/docs"], ["dataset.corpus_dir=/data/globex/en/docs"]],
            ["corpus_dir=acme/en/docs", "corpus_dir=globex/en/docs"],
            id="swept-paths-keep-their-distinct-tail",
        ),
        pytest.param(
            [["retriever.top_k=5", "reranker.top_k=3"], ["retriever.top_k=10", "reranker.top_k=5"]],
            ["retriever.top_k=5 reranker.top_k=3", "retriever.top_k=10 reranker.top_k=5"],
            id="keys-with-one-last-part-keep-more",
        ),
        pytest.param([[], ["+retriever.top_k=5"]], ["defaults", "top_k=5"], id="an-added-key"),
        pytest.param(
            [["models=offline", "+seed=1"], ["models=openai_compatible", "+seed=2"]],
            ["offline seed=1", "openai_compatible seed=2"],
            id="only-config-groups-show-their-value-alone",
        ),
        pytest.param(
            [["pipeline=hybrid", "dataset.corpus_dir=/home/alice/kb/en", "mlflow.tracking_uri=http://mlflow:5000/x"]],
            ["hybrid corpus_dir=en tracking_uri=http://mlflow:5000/x"],
            id="a-single-job-shows-all-its-overrides",
        ),
    ],
)
def test_short_labels_name_each_run_by_what_differs(overrides, labels):
    assert short_labels(overrides) == labels
