"""GET /metrics (issue 38, section 6): the real server over a real BM25 index and a real MLflow sqlite store,
scraped and parsed as Prometheus parses it."""

import logging
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from pipelines.errors import ConfigError
from serving.http.app import create_app
from serving.http.auth import bearer
from serving.http.state import ServerState
from serving.online.traces import Traces
from serving.principals import Principal, key_subject, read_api_keys
from serving.settings import ServeSettings, TraceSettings

TENANTS = ("tenant-umbrella-3c9", "tenant-wayne-81f")
KEYS = {
    "k-umbrella": Principal(TENANTS[0], ("hr",)),
    "k-wayne": Principal(TENANTS[1]),
    "k-ops": Principal("ops", admin=True),
}
UMBRELLA, WAYNE, OPS = ({"Authorization": f"Bearer {key}"} for key in KEYS)
QUESTIONS = (
    "How many days of paid annual leave do full-time employees accrue?",
    "What is the hotel limit in Oslo?",
)
LOOPBACK = ("127.0.0.1", 50000)
ELSEWHERE = ("203.0.113.9", 50000)


@pytest.fixture
def serve(mlflow_store, tmp_path, bm25):
    """make(settings, client address) -> (a client of the real app serving the challenger, its traces)."""
    _, client, _ = mlflow_store
    client.create_experiment("served", artifact_location=(tmp_path / "traces").as_uri())
    traces = Traces.for_model(TraceSettings(content="none"), "models:/rag@challenger", "served")

    def make(address: tuple[str, int] = LOOPBACK, **settings) -> TestClient:
        state = ServerState(bm25, "models:/rag@challenger", traces)
        return TestClient(create_app(state, bearer(KEYS.get), ServeSettings(**settings)), client=address)

    return make, traces


def scrape(api: TestClient, headers: dict | None = None) -> dict[tuple[str, tuple], float]:
    """Every sample of GET /metrics: (name, sorted labels) -> value."""
    reply = api.get("/metrics", headers=headers)
    assert reply.status_code == 200, reply.text
    assert reply.headers["content-type"].startswith("text/plain")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(reply.text)
        for sample in family.samples
    }


def test_a_loopback_scrape_counts_requests_stages_refusals_feedback_and_traces(serve):
    make, traces = serve
    api = make()
    replies = [api.post("/query", json={"question": q}, headers=UMBRELLA).json() for q in QUESTIONS]
    assert api.post("/feedback", json={"trace_id": replies[0]["trace_id"], "rating": -1}, headers=UMBRELLA).status_code == 202
    assert api.post("/query", json={"question": QUESTIONS[0]}).status_code == 401
    assert api.get("/no/such/path").status_code == 404
    traces.drain()
    assert traces.submit(lambda: 1 / 0)  # a store that refuses a trace: the writer drops and counts it
    traces.drain()
    samples = scrape(api)
    assert samples[("ragtune_requests_total", (("status", "200"), ("variant", "challenger")))] == 2
    assert samples[("ragtune_request_latency_seconds_count", (("stage", "total"),))] == 2
    for stage in replies[0]["stages_ms"]:
        assert samples[("ragtune_request_latency_seconds_count", (("stage", stage),))] == 2
    assert samples[("ragtune_refusals_total", (("path", "/query"), ("status", "401")))] == 1
    assert samples[("ragtune_refusals_total", (("path", "other"), ("status", "404")))] == 1  # the client's path: no label
    assert samples[("ragtune_feedback_total", (("rating", "-1"), ("scale", "2")))] == 1
    assert samples[("ragtune_traces_sent_total", ())] == traces.counts()["sent"] == 3  # two traces, one rating
    assert samples[("ragtune_traces_dropped_total", ())] == 1
    assert samples[("ragtune_traces_queued", ())] == 0


def test_no_tenant_question_or_answer_reaches_the_metrics(serve):
    """One scrape covers every tenant: a label drawn from a request would leak it to whoever reads the metrics."""
    make, traces = serve
    api = make()
    answers = []
    for headers, question in zip((UMBRELLA, WAYNE), QUESTIONS, strict=True):
        reply = api.post("/query", json={"question": question}, headers=headers)
        assert reply.status_code == 200, reply.text
        answers.append(reply.json()["answer"])
    api.post("/query", json={"question": QUESTIONS[1], "filters": {"field": "meta.x", "operator": "?"}}, headers=WAYNE)
    traces.drain()
    text = api.get("/metrics").text
    assert samples_of(text, "ragtune_requests_total") >= 2
    leaked = [value for value in (*TENANTS, *QUESTIONS, *(a for a in answers if a)) if value in text]
    assert leaked == []


def samples_of(text: str, name: str) -> float:
    return sum(s.value for f in text_string_to_metric_families(text) for s in f.samples if s.name == name)


@pytest.mark.parametrize("method", ["GET", "POST"])
@pytest.mark.parametrize("headers", [None, UMBRELLA, {"Authorization": "Bearer forged"}], ids=["none", "tenant", "bad"])
def test_off_loopback_metrics_answers_as_an_unknown_path_and_is_logged(serve, caplog, method, headers):
    make, _ = serve
    api = make(ELSEWHERE)
    unknown = api.request(method, "/no-such-path", headers=headers)
    with caplog.at_level(logging.INFO, logger="ragtune.serve"):
        hidden = api.request(method, "/metrics", headers=headers)
    assert (hidden.status_code, hidden.json()["error"]) == (unknown.status_code, unknown.json()["error"]) == (404, "Not Found")
    assert set(hidden.headers) == set(unknown.headers)
    assert '"status": 404' in caplog.text and '"path": "/metrics"' in caplog.text
    assert "/metrics" not in api.get("/openapi.json").json()["paths"]


def test_an_admin_key_reads_metrics_from_anywhere(serve):
    make, _ = serve
    api = make(ELSEWHERE)
    api.post("/query", json={"question": QUESTIONS[0]}, headers=OPS)
    assert scrape(api, OPS)[("ragtune_requests_total", (("status", "200"), ("variant", "challenger")))] == 1


def test_behind_a_trusted_proxy_loopback_is_no_credential(serve):
    """A proxy in front makes every client look like loopback: only an admin key reads the metrics then."""
    make, _ = serve
    api = make(LOOPBACK, trust_proxy=True)
    assert api.get("/metrics").status_code == 404
    assert scrape(api, OPS)


def test_two_apps_in_one_process_count_apart(serve):
    make, _ = serve
    first, second = make(), make()
    first.post("/query", json={"question": QUESTIONS[0]}, headers=UMBRELLA)
    assert samples_of(first.get("/metrics").text, "ragtune_requests_total") == 1
    assert samples_of(second.get("/metrics").text, "ragtune_requests_total") == 0


def test_the_api_keys_file_marks_admin_keys(tmp_path: Path):
    keys = tmp_path / "keys.yaml"
    keys.write_text("k-ops: {tenant: ops, groups: [], admin: true}\nk-acme: {tenant: acme, groups: [hr]}\n")
    assert read_api_keys(keys) == {"k-ops": Principal("ops", (), True, key_subject("k-ops")),
                                   "k-acme": Principal("acme", ("hr",), subject=key_subject("k-acme"))}
    keys.write_text("k-ops: {tenant: ops, groups: [], admin: 'yes'}\n")
    with pytest.raises(ConfigError, match="'admin' true or false"):
        read_api_keys(keys)
