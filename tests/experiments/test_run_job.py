"""A job in process (`run_job`, what run.py runs), on a real MLflow store: the checks that stop a job before its
work. How run.py turns such an error into one line and exit 2 is checked once, as a user runs it, in test_run.py."""

from pathlib import Path

import mlflow
import pytest

from experiments.datasets.golden.items import GoldenError
from experiments.runs.runner import run_job
from experiments.runs.tracking import TrackingError
from pipelines.errors import ConfigError
from pipelines.models import ModelUnavailableError
from tests.support.run_py import job_config, write_local_dataset


def failed_run(tmp_path: Path, experiment: str) -> mlflow.entities.Run:
    client = mlflow.MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    (run,) = client.search_runs([client.get_experiment_by_name(experiment).experiment_id])
    assert run.info.status == "FAILED"
    return run


def test_an_unreachable_llm_endpoint_fails_before_indexing(tmp_path):
    cfg = job_config(tmp_path, *write_local_dataset(tmp_path), "pipeline=naive", "models=openai_compatible",
                     "models.generator.base_url=http://127.0.0.1:9/v1", "models.generator.api_key_env=HOME")
    with pytest.raises(ModelUnavailableError, match="models.generator.base_url: LLM endpoint http://127.0.0.1:9/v1 is unreachable"):
        run_job(cfg, tmp_path / "job")
    assert not (tmp_path / "cache" / "index").exists()
    assert "is unreachable" in failed_run(tmp_path, "corpus").data.tags["ragtune.error"]


def test_an_unreachable_slot_endpoint_fails_before_indexing_naming_the_slot(tmp_path):
    cfg = job_config(tmp_path, *write_local_dataset(tmp_path), "pipeline=advanced", "rewriter=multi_query",
                     "rewriter.model=qwen", "rewriter.endpoint={base_url:'http://127.0.0.1:9/v1',api_key_env:HOME}")
    with pytest.raises(ModelUnavailableError, match="rewriter.endpoint.base_url: LLM endpoint http://127.0.0.1:9/v1 is unreachable"):
        run_job(cfg, tmp_path / "job")
    assert not (tmp_path / "cache" / "index").exists()


def test_an_unreachable_tracking_server_fails_naming_the_key(tmp_path):
    cfg = job_config(tmp_path, "mlflow.tracking_uri=http://127.0.0.1:9")
    with pytest.raises(TrackingError, match="mlflow.tracking_uri: MLflow tracking server http://127.0.0.1:9 is unreachable"):
        run_job(cfg, tmp_path / "job")


def test_an_artifact_root_under_a_file_is_refused_before_any_experiment_exists(tmp_path):
    (tmp_path / "afile").write_text("x")
    cfg = job_config(tmp_path, f"mlflow.artifact_root={tmp_path / 'afile' / 'artifacts'}")
    with pytest.raises(TrackingError, match=r"mlflow.artifact_root: cannot write .*afile/artifacts \(Not a directory\)"):
        run_job(cfg, tmp_path / "job")
    assert mlflow.MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}").get_experiment_by_name("demo") is None


def test_a_misspelt_top_level_key_fails_the_run_with_a_did_you_mean(tmp_path):
    cfg = job_config(tmp_path, "pipeline=bm25", "+retriver.top_k=5")
    with pytest.raises(ConfigError, match=r"config key 'retriver': unknown top-level key .*did you mean 'retriever'\?"):
        run_job(cfg, tmp_path / "job")
    assert "unknown top-level key" in failed_run(tmp_path, "demo").data.tags["ragtune.error"]


def test_a_broken_golden_set_fails_before_work_and_the_run_ends_failed(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_text("Annual leave is fifteen days.", encoding="utf-8")
    golden = tmp_path / "golden.jsonl"
    golden.write_text('{"id": "q1", "question": "How long?", "evidence": ["twenty days"]}\n', encoding="utf-8")
    cfg = job_config(tmp_path, "dataset=local", f"dataset.corpus_dir={corpus}", f"dataset.golden={golden}")
    with pytest.raises(GoldenError, match=r"golden.jsonl:1.*q1"):
        run_job(cfg, tmp_path / "job")
    assert "evidence quote not found" in failed_run(tmp_path, "corpus").data.tags["ragtune.error"]
    assert not (tmp_path / "cache" / "index").exists()
