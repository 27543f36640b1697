"""Promote a run that run.py made and serve it: the served answers are the ones its per_question.jsonl records."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import mlflow
import pytest

from serving import promote
from serving.loopback import free_port, wait_until_up
from tests.support.run_py import client, job_dir, run, write_local_dataset

pytestmark = pytest.mark.slow
SERVE_PY = Path(__file__).resolve().parents[2] / "serve.py"
# What a served reply shares with the run's record of the same question.
SHARED = ("answer", "refused", "unsupported_sentences")


@pytest.fixture(scope="module")
def promoted(tmp_path_factory):
    """The offline default answerer on the local set, evaluated, then promoted as rag@production."""
    tmp_path = tmp_path_factory.mktemp("promoted")
    out = job_dir(tmp_path, "naive")
    run(tmp_path, *write_local_dataset(tmp_path), "pipeline=naive", f"hydra.run.dir={out}")
    run_id = json.loads((out / "run.json").read_text())["run_id"]
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    assert promote.main([run_id, "--name", "rag", "--tracking-uri", uri]) == 0
    records = [json.loads(line) for line in (out / "per_question.jsonl").read_text().splitlines()]
    return tmp_path, uri, run_id, records


def test_the_promoted_model_answers_exactly_as_the_run_recorded(promoted, tmp_path, monkeypatch):
    root, uri, run_id, records = promoted
    monkeypatch.chdir(tmp_path)  # another folder, and the run's index cache out of reach
    mlflow.set_tracking_uri(uri)
    model = mlflow.pyfunc.load_model("models:/rag@production")
    replies = model.predict([{"question": r["question"]} for r in records])
    for record, reply in zip(records, replies, strict=True):
        assert {k: reply[k] for k in SHARED} == {k: record[k] for k in SHARED}, record["id"]
        assert [{k: v for k, v in c.items() if k != "snippet"} for c in reply["citations"]] == record["citations"]
        assert all(c["snippet"] for c in reply["citations"])
    version = client(root).get_model_version_by_alias("rag", "production")
    assert version.tags["ragtune.source_run"] == run_id and version.tags["ragtune.gate"] == "first version"


def test_mlflow_models_serve_answers_as_the_run_recorded(promoted):
    root, uri, _, records = promoted
    port = free_port()
    log = root / "serve.log"
    server = subprocess.Popen(
        [sys.executable, "-m", "mlflow", "models", "serve", "-m", "models:/rag@production", "--env-manager", "local",
         "--host", "127.0.0.1", "--port", str(port)],
        # MLflow starts `uvicorn` from PATH: the venv's, as with an activated venv
        env={**os.environ, "MLFLOW_TRACKING_URI": uri, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"},
        stdout=log.open("w"), stderr=subprocess.STDOUT, cwd=root,
    )
    try:
        wait_until_up(f"http://127.0.0.1:{port}/ping", server, log)
        reply = httpx.post(f"http://127.0.0.1:{port}/invocations", json={"inputs": [{"question": records[0]["question"]}]},
                           timeout=120)
        assert reply.status_code == 200, reply.text
        assert reply.json()["predictions"][0]["answer"] == records[0]["answer"]
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_serve_py_answers_as_the_run_recorded_and_only_to_a_known_key(promoted):
    root, uri, _, records = promoted
    (root / "keys.yaml").write_text("k-acme: {tenant: acme, groups: []}\n")
    port, log = free_port(), root / "serve_py.log"
    server = subprocess.Popen(
        [sys.executable, str(SERVE_PY), "model=models:/rag@production",
         f"serve.api_keys_file={root / 'keys.yaml'}", f"serve.port={port}", f"mlflow.tracking_uri={uri}",
         "serve.autolog=true"],
        stdout=log.open("w"), stderr=subprocess.STDOUT, cwd=root,
    )
    try:
        wait_until_up(f"http://127.0.0.1:{port}/readyz", server, log, seconds=240)
        url = f"http://127.0.0.1:{port}/query"
        assert httpx.post(url, json={"question": records[0]["question"]}, timeout=60).status_code == 401
        reply = httpx.post(url, json={"question": records[0]["question"]}, headers={"Authorization": "Bearer k-acme"},
                           timeout=120)
        assert reply.status_code == 200, reply.text
        assert {k: reply.json()[k] for k in SHARED} == {k: records[0][k] for k in SHARED}
        assert '"tenant": "acme", "status": 200' in log.read_text()  # one JSON log line per request
        assert "models:/rag@production is not tenant-split: none of its 3 documents has a tenant or acl" in log.read_text()
        assert reply.json()["stages_ms"]  # milliseconds per component, also in the log line
        assert traced_components(uri, "ragtune-serve", set(reply.json()["stages_ms"])) >= set(reply.json()["stages_ms"])
    finally:
        server.terminate()
        server.wait(timeout=30)


def traced_components(uri: str, experiment: str, expected: set[str], seconds: float = 60) -> set[str]:
    """The component spans of the request traces logged under `experiment`: polled until they hold `expected`
    (MLflow writes traces asynchronously), or for `seconds`."""
    client = mlflow.MlflowClient(uri)
    deadline, names = time.monotonic() + seconds, set()
    while time.monotonic() < deadline and not names >= expected:
        found = client.get_experiment_by_name(experiment)
        traces = client.search_traces([found.experiment_id]) if found else []
        names = {span.attributes.get("haystack.component.name") for trace in traces for span in trace.data.spans}
        time.sleep(0.5)
    return names


def test_serve_py_names_a_missing_model_in_one_line(promoted, tmp_path):
    _, uri, _, _ = promoted
    (tmp_path / "keys.yaml").write_text("k: {tenant: t, groups: []}\n")
    result = subprocess.run(
        [sys.executable, str(SERVE_PY), "model=models:/nothing@production",
         f"serve.api_keys_file={tmp_path / 'keys.yaml'}", f"mlflow.tracking_uri={uri}", f"serve.port={free_port()}"],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 2 and "error:" in result.stderr and "Traceback" not in result.stderr, result.stderr


def test_serve_py_names_a_damaged_bundle_in_one_line(promoted, tmp_path):
    _, uri, _, _ = promoted
    version = mlflow.MlflowClient(uri).get_model_version_by_alias("rag", "production")
    model_id = version.source.removeprefix("models:/")  # MLflow 3: the version's source is its logged model
    stored = mlflow.MlflowClient(uri).get_logged_model(model_id).artifact_location.removeprefix("file://")
    embeddings = next(Path(stored).rglob("embeddings.npy"))  # in the registered model's own files
    saved = embeddings.read_bytes()
    embeddings.unlink()
    (tmp_path / "keys.yaml").write_text("k: {tenant: t, groups: []}\n")
    try:
        result = subprocess.run(
            [sys.executable, str(SERVE_PY), "model=models:/rag@production", f"serve.api_keys_file={tmp_path / 'keys.yaml'}",
             f"mlflow.tracking_uri={uri}", f"serve.port={free_port()}"],
            capture_output=True, text=True, timeout=300,
        )
    finally:
        embeddings.write_bytes(saved)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert "is damaged: index/" in result.stderr and "embeddings.npy is missing" in result.stderr


def test_a_promoted_agent_streams_its_steps_and_answers_as_its_run_recorded(tmp_path):
    """pipeline=agentic on SmolLM2, run, promoted with the tables it read (the bundle ships dataset.sql), and served
    by serve.py from another folder: /query streams a step per tool call, then the answer the run recorded."""
    out = job_dir(tmp_path, "agentic")
    sql = Path(__file__).resolve().parents[2] / "data" / "demo" / "sql" / "company.sql"
    run(tmp_path, *write_local_dataset(tmp_path), "pipeline=agentic", "pipeline.components.agent.first_tool=kb_search",
        f"+dataset.sql={sql}", f"hydra.run.dir={out}")
    run_id = json.loads((out / "run.json").read_text())["run_id"]
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    assert promote.main([run_id, "--name", "agent", "--tracking-uri", uri]) == 0
    record = json.loads((out / "per_question.jsonl").read_text().splitlines()[1])
    served_from = tmp_path / "elsewhere"
    served_from.mkdir()
    (served_from / "keys.yaml").write_text("k-acme: {tenant: acme, groups: []}\n")
    port, log = free_port(), served_from / "serve_py.log"
    server = subprocess.Popen(
        [sys.executable, str(SERVE_PY), "model=models:/agent@production", "serve.api_keys_file=keys.yaml",
         f"serve.port={port}", f"mlflow.tracking_uri={uri}"],
        stdout=log.open("w"), stderr=subprocess.STDOUT, cwd=served_from,
    )
    try:
        wait_until_up(f"http://127.0.0.1:{port}/readyz", server, log, seconds=240)
        reply = httpx.post(f"http://127.0.0.1:{port}/query", json={"question": record["question"], "stream": True},
                           headers={"Authorization": "Bearer k-acme"}, timeout=300)
        assert reply.status_code == 200, reply.text
        events = [(block.split("\n")[0].removeprefix("event: "), json.loads(block.split("data: ", 1)[1]))
                  for block in reply.text.strip().split("\n\n")]
        steps = [data for event, data in events if event == "step"]
        answer = events[-1][1]
        assert events[-1][0] == "answer" and [event for event, _ in events[:-1]] == ["step"] * len(steps)
        assert [s["tool"] for s in steps] == [t for t in answer["agent"]["tools"] if t != "final_answer"]
        assert steps[0]["tool"] == "kb_search" and steps[0]["observation"]
        assert {k: answer[k] for k in SHARED} == {k: record[k] for k in SHARED}
    finally:
        server.terminate()
        server.wait(timeout=30)
