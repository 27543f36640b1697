"""The store every command uses, the artifact root, and runs left RUNNING by killed processes."""

import os
import socket
import subprocess
import sys

import mlflow
import pytest
from mlflow.tracking import MlflowClient

from experiments.runs import tracking


def test_store_precedence_is_flag_then_environment_then_local_default(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert tracking.resolve_tracking_uri() == f"sqlite:///{tmp_path / 'mlruns' / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://tracking.example:5000")
    assert tracking.resolve_tracking_uri() == "http://tracking.example:5000"
    assert tracking.resolve_tracking_uri("sqlite:///x.db") == f"sqlite:///{tmp_path / 'x.db'}"


def test_the_artifact_root_sits_beside_a_sqlite_store_and_a_server_keeps_its_own(tmp_path):
    assert tracking.default_artifact_root(f"sqlite:///{tmp_path}/m.db") == tmp_path / "artifacts"
    assert tracking.default_artifact_root("http://127.0.0.1:5000") is None


def test_an_unreachable_server_fails_fast_naming_the_key():
    with pytest.raises(tracking.TrackingError, match=r"--tracking-uri: MLflow tracking server http://127.0.0.1:9 "
                                                     r"is unreachable"):
        tracking.connect("http://127.0.0.1:9", key="--tracking-uri", timeout=2)


def test_a_server_that_accepts_connections_but_never_answers_fails_in_the_probes_time():
    with socket.socket() as silent:  # listens, and never reads or answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        with pytest.raises(tracking.TrackingError, match=rf"mlflow.tracking_uri: MLflow tracking server {url} did not "
                                                         r"answer within 0.5 s"):
            tracking.connect(url, timeout=0.5)


def test_mlflows_own_http_calls_get_a_timeout_and_one_retry_unless_the_user_set_them(monkeypatch):
    for name in tracking.HTTP_DEFAULTS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "45")
    with pytest.raises(tracking.TrackingError):
        tracking.connect("http://127.0.0.1:9", timeout=2)
    assert os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] == "45" and os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] == "1"


@pytest.mark.parametrize(("root", "message"), [
    ("nosuchscheme://bucket/x", "MLflow stores no artifacts at nosuchscheme:// (it knows abfss, b2, dbfs, file"),
    ("http://127.0.0.1:9/artifacts", "http://127.0.0.1:9/artifacts is unreachable"),
    ("/proc/ragtune/artifacts", "cannot write /proc/ragtune/artifacts (No such file or directory)"),
])
def test_an_artifact_root_mlflow_cannot_use_is_refused_before_the_experiment_exists(tmp_path, root, message):
    uri = f"sqlite:///{tmp_path / 'm.db'}"
    with pytest.raises(tracking.TrackingError, match=rf"mlflow.artifact_root: {message}".replace("(", r"\(").replace(")", r"\)")):
        tracking.use_experiment({"tracking_uri": uri, "artifact_root": root}, "demo")
    assert MlflowClient().get_experiment_by_name("demo") is None


def test_a_remote_artifact_root_of_a_known_scheme_is_kept_as_given(tmp_path):
    uri = f"sqlite:///{tmp_path / 'm.db'}"
    experiment = tracking.use_experiment({"tracking_uri": uri, "artifact_root": "s3://bucket/ragtune"}, "demo")
    assert MlflowClient().get_experiment(experiment).artifact_location == "s3://bucket/ragtune/demo"


def test_a_configured_root_that_differs_from_the_experiments_is_reported(tmp_path, capsys):
    uri = f"sqlite:///{tmp_path / 'm.db'}"
    first = tracking.use_experiment({"tracking_uri": uri, "artifact_root": str(tmp_path / "a")}, "demo")
    assert MlflowClient().get_experiment(first).artifact_location == (tmp_path / "a" / "demo").as_uri()
    capsys.readouterr()
    again = tracking.use_experiment({"tracking_uri": uri, "artifact_root": str(tmp_path / "b")}, "demo")
    assert again == first
    assert f"keeps its artifacts in {(tmp_path / 'a' / 'demo').as_uri()}" in capsys.readouterr().err


def test_runs_of_dead_local_processes_are_marked_stale_and_live_ones_kept(tmp_path):
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path / 'm.db'}")
    client = MlflowClient()
    experiment = client.create_experiment("demo")
    finished = subprocess.Popen([sys.executable, "-c", "pass"])
    finished.wait()
    host = socket.gethostname()
    dead = client.create_run(experiment, tags={tracking.PID_TAG: str(finished.pid), tracking.HOST_TAG: host})
    alive = client.create_run(experiment, tags={tracking.PID_TAG: str(os.getpid()), tracking.HOST_TAG: host})
    elsewhere = client.create_run(experiment, tags={tracking.PID_TAG: str(finished.pid), tracking.HOST_TAG: "other"})
    assert tracking.mark_stale_runs(client, experiment) == [dead.info.run_id]
    assert client.get_run(dead.info.run_id).info.status == "FAILED"
    assert tracking.STALE_TAG in client.get_run(dead.info.run_id).data.tags
    assert {client.get_run(r.info.run_id).info.status for r in (alive, elsewhere)} == {"RUNNING"}


def test_the_git_commit_is_the_projects_wherever_the_command_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tracking.PROJECT_DIR, capture_output=True, text=True)
    assert tracking.git_commit().removesuffix("-dirty") == head.stdout.strip()
    assert tracking.source_tags()["mlflow.source.git.commit"] == head.stdout.strip()
