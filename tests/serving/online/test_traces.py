"""Production traces and feedback (issue 38, sections 1-2): the real server over a real MLflow sqlite store."""

import json
import logging
import subprocess
import sys
import threading
from pathlib import Path

import mlflow
import pytest
from fastapi.testclient import TestClient
from haystack import tracing

import serving.online.retention as retention
from serving.cli import main as cli
from serving.http.app import create_app
from serving.http.auth import bearer
from serving.http.state import ServerState
from serving.loopback import free_port, wait_until_up
from serving.online.traces import Traces
from serving.online.variants import Variant
from serving.principals import Principal
from serving.pyfunc_answerer import PyfuncAnswerer
from serving.settings import ServeSettings, TraceSettings

KEYS = {"k-acme": Principal("acme", ("hr",)), "k-beta": Principal("beta")}
ACME, BETA = {"Authorization": "Bearer k-acme"}, {"Authorization": "Bearer k-beta"}
QUESTION = "What is the hotel limit in Oslo?"
PASSAGE = "The hotel limit in Oslo is 1800 NOK per night."


class TracedAnswerer:
    """Answers with one component span, as a pipeline's timer hands it to the tracer it is given."""

    def ask(self, question, history=None, filters=None, stages=False, on_token=None, on_step=None, tracer=None):
        if tracer is not None:
            with tracer.trace("haystack.component.run", {"haystack.component.name": "retriever",
                                                         "haystack.component.type": "InMemoryBM25Retriever"}) as span:
                span.set_tag("haystack.component.input", {"query": question})
                span.set_tag("haystack.component.output", {"passages": [PASSAGE]})
        return {"answer": PASSAGE, "refused": False, "citations": [], "documents": [], "stages_ms": {}}


@pytest.fixture
def served(mlflow_store, tmp_path, monkeypatch):
    """A server whose traces go to experiment `served` of the test's store: (make(settings), the client)."""
    _, client, _ = mlflow_store
    monkeypatch.setattr(tracing.tracer, "is_content_tracing_enabled", tracing.tracer.is_content_tracing_enabled)
    client.create_experiment("served", artifact_location=(tmp_path / "traces").as_uri())

    def make(**trace) -> tuple[TestClient, Traces]:
        traces = Traces.for_model(TraceSettings(**({"sample": 1.0} | trace)), "models:/rag/3", "served")
        state = ServerState(TracedAnswerer(), "models:/rag/3", traces)
        return TestClient(create_app(state, bearer(KEYS.get), ServeSettings())), traces

    return make, client


def ask(api: TestClient, traces: Traces, headers: dict = ACME) -> str:
    reply = api.post("/query", json={"question": QUESTION}, headers=headers)
    assert reply.status_code == 200, reply.text
    traces.drain()
    return reply.json()["trace_id"]


def test_a_reply_carries_its_mlflow_trace_id_tagged_with_version_variant_request_and_tenant(served):
    make, client = served
    api, traces = make(content="full")
    trace = client.get_trace(ask(api, traces))
    tags = trace.info.tags
    assert trace.info.trace_id.startswith("tr-")
    assert tags["ragtune.model_version"] == "3" and tags["ragtune.variant"] == "champion"
    assert tags["ragtune.tenant"] == "acme" and tags["ragtune.request_id"] and tags["ragtune.refused"] == "false"
    assert float(tags["ragtune.latency_ms"]) >= 0
    assert [span.name for span in trace.data.spans] == ["request", "retriever"]
    assert QUESTION in json.dumps(trace.data.to_dict())
    assert traces.counts()["dropped"] == 0 and api.get("/healthz").json()["traces"]["dropped"] == 0


class DegradedAnswerer(TracedAnswerer):
    """Answers as a hybrid whose dense path was dropped (tests/serving/test_degradation.py drops it for real)."""

    def ask(self, *args, **kwargs):
        return super().ask(*args, **kwargs) | {"degraded": ["dense"]}


def test_a_degraded_reply_says_so_in_its_trace_and_its_log_line(served, caplog):
    make, client = served
    caplog.set_level(logging.INFO, "ragtune.serve")
    api, traces = make()
    api.app.state.context.state.variants[0].answerer = DegradedAnswerer()
    trace_id = ask(api, traces)
    assert client.get_trace(trace_id).info.tags["ragtune.degraded"] == "dense"
    (line,) = [json.loads(r.getMessage()) for r in caplog.records if trace_id in r.getMessage()]
    assert line["degraded"] == ["dense"]
    undegraded = make()
    assert "ragtune.degraded" not in client.get_trace(ask(*undegraded)).info.tags


def test_redacted_traces_hold_no_question_or_passage_text(served):
    make, client = served
    api, traces = make(content="redacted")
    trace = client.get_trace(ask(api, traces))
    assert trace.data.spans[1].attributes["haystack.component.name"] == "retriever"
    stored = json.dumps(trace.to_dict())
    assert QUESTION not in stored and PASSAGE not in stored and "Oslo" not in stored
    assert '\\"chars\\": 32' in stored or '"chars": 32' in stored  # the question's length, beside its hash


def test_an_unsampled_request_keeps_its_root_span_and_tags_only(served):
    make, client = served
    api, traces = make(sample=0.0, content="none")
    trace = client.get_trace(ask(api, traces))
    assert [span.name for span in trace.data.spans] == ["request"]
    assert trace.info.tags["ragtune.sampled"] == "false" and trace.info.tags["ragtune.tenant"] == "acme"
    assert QUESTION not in json.dumps(trace.to_dict())


def test_a_full_queue_drops_traces_and_counts_them_while_replies_go_out(served):
    make, _ = served
    api, traces = make(queue_size=1)
    stuck, release = threading.Event(), threading.Event()
    traces.submit(lambda: (stuck.set(), release.wait(30)))  # a store that hangs
    assert stuck.wait(10)
    replies = [api.post("/query", json={"question": QUESTION}, headers=ACME) for _ in range(4)]
    assert [r.status_code for r in replies] == [200] * 4
    assert api.get("/healthz").json()["traces"]["dropped"] == 3  # one fits the queue
    release.set()


def test_the_owner_rates_a_reply_and_rating_again_replaces_it(served):
    make, client = served
    api, traces = make()
    trace_id = ask(api, traces)
    assert api.post("/feedback", json={"trace_id": trace_id, "rating": -1}, headers=ACME).status_code == 202
    again = api.post("/feedback", json={"trace_id": trace_id, "rating": 4, "scale": 5, "comment": "close"},
                     headers=ACME)
    assert again.status_code == 202 and again.json() == {"trace_id": trace_id, "status": "accepted"}
    traces.drain()
    ratings = [a for a in client.get_trace(trace_id).info.assessments if a.name == "user_rating" and a.valid]
    assert [a.value for a in ratings] == [4] and ratings[0].source.source_id == "acme|hr"
    assert "close" not in json.dumps(ratings[0].to_dictionary())  # redacted by default, like the question


def test_another_tenant_and_an_unknown_trace_get_the_same_404(served, caplog):
    make, client = served
    api, traces = make()
    trace_id = ask(api, traces)
    caplog.set_level("INFO", logger="ragtune.serve")
    other = api.post("/feedback", json={"trace_id": trace_id, "rating": 1}, headers=BETA)
    unknown = api.post("/feedback", json={"trace_id": "tr-" + "0" * 32, "rating": 1}, headers=ACME)
    assert other.status_code == unknown.status_code == 404
    assert {**other.json(), "request_id": ""} == {**unknown.json(), "request_id": ""}
    lines = [json.loads(r.getMessage()) for r in caplog.records if '"path": "/feedback"' in r.getMessage()]
    assert [sorted(line) for line in lines] == [sorted(lines[1])] * 2 and lines[0]["refused"] == lines[1]["refused"]
    traces.drain()
    assert not client.get_trace(trace_id).info.assessments


@pytest.mark.parametrize("body", [
    {"trace_id": "t", "rating": 3}, {"trace_id": "t", "rating": 6, "scale": 5}, {"trace_id": "t", "rating": 1,
                                                                                 "comment": "x" * 4001},
])
def test_a_bad_rating_is_refused_in_one_line(served, body):
    make, _ = served
    api, _ = make()
    reply = api.post("/feedback", json=body, headers=ACME)
    assert reply.status_code == 400 and reply.json()["error"].startswith("invalid request:")


def test_the_openapi_schema_documents_feedback(served):
    make, _ = served
    api, _ = make()
    path = api.get("/openapi.json").json()["paths"]["/feedback"]["post"]
    assert path["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith("FeedbackRequest")
    assert {"202", "404"} <= set(path["responses"])


def test_prune_deletes_only_the_served_models_old_traces(served, mlflow_store, capsys, monkeypatch):
    make, client = served
    uri, _, demo = mlflow_store
    api, traces = make()
    ask(api, traces)
    mlflow.start_span_no_context("elsewhere", experiment_id=demo).end()
    mlflow.flush_trace_async_logging()
    served_id = client.get_experiment_by_name("served").experiment_id
    assert cli(["traces", "prune", "model=models:/rag/3", "serve.trace_experiment=served",
                f"mlflow.tracking_uri={uri}", "serve.trace.retention_days=1"]) == 0
    assert len(client.search_traces([served_id])) == 1  # younger than a day: kept
    capsys.readouterr()
    monkeypatch.setattr(retention, "DAY_MS", -86_400_000)  # as seen a day from now: past its retention
    assert cli(["traces", "prune", "model=models:/rag/3", "serve.trace_experiment=served",
                f"mlflow.tracking_uri={uri}", "serve.trace.retention_days=1"]) == 0
    assert "deleted 1 traces older than 1 days from experiment 'served'" in capsys.readouterr().out
    assert client.search_traces([served_id]) == [] and len(client.search_traces([demo])) == 1


def test_serve_autolog_still_works_and_means_every_request_is_sampled():
    from serving.settings import compose_serve, serve_settings

    old = serve_settings(compose_serve(["serve.autolog=true", "serve.trace.sample=0.1"]))
    assert old.trace.sample == 1.0 and old.trace_experiment == "ragtune-serve"
    with pytest.raises(Exception, match="serve.trace.content"):
        serve_settings(compose_serve(["serve.trace.content=some"]))


class PyfuncPipeline(TracedAnswerer):
    takes_filters = True


def test_the_pyfunc_model_records_its_requests_with_the_same_tags(served):
    make, client = served
    _, traces = make(content="redacted")
    answerer = PyfuncAnswerer(PyfuncPipeline(), ServeSettings(), KEYS.get, traces, Variant("champion", "", "3"))
    reply = answerer.ask(QUESTION, credentials="k-beta")
    traces.drain()
    trace = client.get_trace(reply["trace_id"])
    assert trace.info.tags["ragtune.tenant"] == "beta" and trace.info.tags["ragtune.model_version"] == "3"
    assert [span.name for span in trace.data.spans] == ["request", "retriever"]
    assert QUESTION not in json.dumps(trace.to_dict())


@pytest.mark.slow
def test_a_tracking_server_that_stops_mid_load_drops_traces_and_fails_no_reply(tmp_path, monkeypatch):
    monkeypatch.setattr(tracing.tracer, "is_content_tracing_enabled", tracing.tracer.is_content_tracing_enabled)
    port, before = free_port(), mlflow.get_tracking_uri()
    server = subprocess.Popen(
        [str(Path(sys.executable).with_name("mlflow")), "server", "--host", "127.0.0.1", "--port", str(port),
         "--backend-store-uri", f"sqlite:///{tmp_path / 'server.db'}",
         "--default-artifact-root", (tmp_path / "artifacts").as_uri(), "--workers", "1"],
        stdout=(tmp_path / "server.log").open("w"), stderr=subprocess.STDOUT,
    )
    try:
        wait_until_up(f"http://127.0.0.1:{port}/health", server, tmp_path / "server.log", seconds=60)
        mlflow.set_tracking_uri(f"http://127.0.0.1:{port}")
        traces = Traces.for_model(TraceSettings(queue_size=2), "models:/rag/3", None)
        state = ServerState(TracedAnswerer(), "models:/rag/3", traces)
        api = TestClient(create_app(state, bearer(KEYS.get), ServeSettings()))
        ask(api, traces)
        assert traces.counts() == {"sent": 1, "dropped": 0, "queued": 0}
        server.terminate()
        server.wait(timeout=30)
        replies = [api.post("/query", json={"question": QUESTION}, headers=ACME) for _ in range(10)]
        assert [r.status_code for r in replies] == [200] * 10
        assert api.get("/healthz").json()["traces"]["dropped"] >= 7  # the writer is stuck on the dead store
    finally:
        mlflow.set_tracking_uri(before)
        server.terminate()
        server.wait(timeout=30)


@pytest.mark.parametrize("content", ["full", "redacted"])
def test_a_real_pipelines_spans_are_traced_and_redacted_ones_hold_no_text(served, bm25, content):
    make, client = served
    _, traces = make(content=content)
    api = TestClient(create_app(ServerState(bm25, "models:/rag/3", traces), bearer(KEYS.get), ServeSettings()))
    question = "How many days of paid annual leave do full-time employees accrue?"
    reply = api.post("/query", json={"question": question}, headers=ACME).json()
    traces.drain()
    trace = client.get_trace(reply["trace_id"])
    names = {span.attributes.get("haystack.component.name") for span in trace.data.spans}
    assert set(reply["stages_ms"]) <= names
    stored = "\n".join(strings([(span.inputs, span.outputs, span.attributes) for span in trace.data.spans]))
    texts = [question, reply["answer"], *(c["snippet"][:60] for c in reply["citations"])]
    assert reply["answer"] and reply["citations"]
    assert [text in stored for text in texts] == [content == "full"] * len(texts)


def strings(value: object) -> list[str]:
    """Every text in what MLflow stored, unescaped."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [text for item in value.values() for text in strings(item)]
    if isinstance(value, list | tuple):
        return [text for item in value for text in strings(item)]
    return []


def test_a_trace_the_store_refuses_is_counted_as_dropped_not_sent(monkeypatch):
    """MLflow's exporter logs a refused trace instead of raising: the writer must still count it as lost."""
    before = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(f"http://127.0.0.1:{free_port()}")  # nothing listens there
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    try:
        traces = Traces(TraceSettings(sample=0.0), "0")
        traces.start(QUESTION, Principal("acme"), "r1", Variant("champion", "", "3")).finish(200, {"answer": "x"})
        traces.drain()
        assert traces.counts() == {"sent": 0, "dropped": 1, "queued": 0}
    finally:
        mlflow.set_tracking_uri(before)
