"""The HTTP layer's control flow with a recording answerer; tests/test_serving.py serves a real promoted run."""

import logging
import threading
import time

import pytest
from fastapi.testclient import TestClient
from haystack import Document
from haystack.utils.filters import document_matches_filter

from experiments.config import ConfigError
from experiments.errors import UserError
from experiments.principals import Principal, read_api_keys, scoped_filters
from experiments.server import ServerState, ServeSettings, bearer_keys, create_app, proxy_headers

KEYS = {"k-acme": Principal("acme", ("hr",)), "k-beta": Principal("beta")}
AUTH = {"Authorization": "Bearer k-acme"}


class RecordingAnswerer:
    def __init__(self, seconds: float = 0.0):
        self.calls, self.seconds = [], seconds

    def ask(self, question, history=None, filters=None):
        self.calls.append({"question": question, "history": history, "filters": filters})
        time.sleep(self.seconds)
        return {"answer": f"re: {question}", "refused": False, "citations": []}


def client(answerer=None, **limits) -> TestClient:
    state = ServerState(answerer, "models:/rag@production")
    return TestClient(create_app(state, bearer_keys(KEYS), ServeSettings(**limits)))


def test_readiness_waits_for_the_model_and_health_does_not():
    waiting = client(None)
    assert waiting.get("/healthz").status_code == 200
    assert waiting.get("/readyz").status_code == 503
    assert waiting.post("/query", json={"question": "hi"}, headers=AUTH).status_code == 503
    assert client(RecordingAnswerer()).get("/readyz").json() == {"ready": True, "model": "models:/rag@production"}


def test_a_query_needs_a_known_key_and_is_scoped_to_its_tenant():
    answerer = RecordingAnswerer()
    api = client(answerer)
    assert api.post("/query", json={"question": "hi"}).status_code == 401
    assert api.post("/query", json={"question": "hi"}, headers={"Authorization": "Bearer nope"}).status_code == 401
    reply = api.post("/query", json={"question": "Hotel limit?", "history": [{"role": "user", "content": "hi"}]},
                     headers=AUTH)
    assert reply.status_code == 200 and reply.json()["answer"] == "re: Hotel limit?" and reply.json()["trace_id"]
    call = answerer.calls[-1]
    assert call["history"] == [{"role": "user", "content": "hi"}]
    assert call["filters"] == scoped_filters(KEYS["k-acme"], None)


def test_a_client_filter_narrows_and_can_never_widen_to_another_tenant():
    answerer = RecordingAnswerer()
    forged = {"field": "meta.tenant", "operator": "==", "value": "beta"}
    client(answerer).post("/query", json={"question": "q", "filters": forged}, headers=AUTH)
    sent = answerer.calls[-1]["filters"]
    documents = [Document(content="x", meta=m) for m in ({}, {"tenant": "acme"}, {"tenant": "beta"}, {"acl": ["hr"]})]
    assert [document_matches_filter(sent, d) for d in documents] == [False, False, False, False]
    narrowed = {"field": "meta.tenant", "operator": "==", "value": "acme"}
    scoped = scoped_filters(KEYS["k-acme"], narrowed)
    assert [document_matches_filter(scoped, d) for d in documents] == [False, True, False, False]
    public = scoped_filters(KEYS["k-beta"], None)
    assert [document_matches_filter(public, d) for d in documents] == [True, False, True, False]  # acl: nobody yet


@pytest.mark.parametrize(("body", "status", "message"), [
    ({"question": "  "}, 400, "question: must not be empty"),
    ({"question": "x" * 101}, 413, "question: 101 characters, the limit is 100"),
    ({"question": "q", "history": [{"role": "user", "content": "h"}] * 4}, 413, "history: 4 turns, the limit is 3"),
    ({"question": "q", "tenant": "beta"}, 400, "tenant: Extra inputs are not permitted"),
    ({"question": "q", "history": [{"role": "root", "content": "h"}]}, 400, "history.0.role"),
    ({"history": []}, 400, "question: Field required"),
])
def test_bad_requests_get_a_4xx_naming_the_field(body, status, message):
    answerer = RecordingAnswerer()
    reply = client(answerer, max_question_chars=100, max_history_turns=3).post("/query", json=body, headers=AUTH)
    assert reply.status_code == status and message in str(reply.json()), reply.json()
    assert answerer.calls == []


def test_malformed_json_is_a_400():
    reply = client(RecordingAnswerer()).post("/query", content=b'{"question": ', headers=AUTH | {"Content-Type": "application/json"})
    assert reply.status_code == 400 and "JSON decode error" in reply.json()["error"]


def test_a_failing_answer_is_a_500_with_its_trace_id_and_a_user_error_a_400(caplog):
    caplog.set_level(logging.INFO, "ragtune.serve")
    class Failing(RecordingAnswerer):
        def __init__(self, error):
            super().__init__()
            self.error = error

        def ask(self, question, history=None, filters=None):
            raise self.error

    broken = client(Failing(RuntimeError("boom"))).post("/query", json={"question": "q"}, headers=AUTH)
    assert broken.status_code == 500 and "internal error (trace_id " in broken.json()["detail"]
    assert '"status": 500' in caplog.text and "boom" in caplog.text
    refused = client(Failing(UserError("pipeline x has no 'filters' input"))).post("/query", json={"question": "q"},
                                                                                 headers=AUTH)
    assert refused.status_code == 400 and "no 'filters' input" in refused.json()["detail"]


def test_a_slow_answer_times_out():
    assert client(RecordingAnswerer(seconds=1.0), timeout_s=0.2).post("/query", json={"question": "q"},
                                                                        headers=AUTH).status_code == 504


def test_requests_beyond_the_pending_bound_are_refused_while_one_runs():
    api = client(RecordingAnswerer(seconds=0.5), max_pending=1)
    codes = []
    threads = [threading.Thread(target=lambda: codes.append(api.post("/query", json={"question": "q"},
                                                                      headers=AUTH).status_code)) for _ in range(3)]
    for t in threads:
        t.start()
        time.sleep(0.05)
    for t in threads:
        t.join()
    assert sorted(codes) == [200, 503, 503]


def test_the_chat_endpoint_takes_history_from_the_messages():
    answerer = RecordingAnswerer()
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"},
                {"role": "assistant", "content": "hello"}, {"role": "user", "content": "Hotel limit?"}]
    reply = client(answerer).post("/v1/chat/completions", json={"model": "x", "messages": messages}, headers=AUTH)
    assert reply.json()["choices"][0]["message"] == {"role": "assistant", "content": "re: Hotel limit?"}
    assert answerer.calls[-1]["question"] == "Hotel limit?" and len(answerer.calls[-1]["history"]) == 3
    streamed = client(answerer).post("/v1/chat/completions", json={"messages": messages, "stream": True}, headers=AUTH)
    assert streamed.status_code == 400 and "streaming is not supported" in streamed.json()["detail"]


def test_header_auth_is_refused_off_loopback_unless_the_proxy_is_trusted():
    with pytest.raises(ConfigError, match="bind serve.host to loopback"):
        proxy_headers("0.0.0.0", trust_proxy=False)
    authenticate = proxy_headers("0.0.0.0", trust_proxy=True)
    api = TestClient(create_app(ServerState(RecordingAnswerer()), authenticate, ServeSettings()))
    assert api.post("/query", json={"question": "q"}).status_code == 401
    assert api.post("/query", json={"question": "q"}, headers={"X-Tenant": "acme", "X-Groups": "hr, it"}).status_code == 200


def test_the_api_keys_file_is_checked_when_read(tmp_path):
    (tmp_path / "keys.yaml").write_text("k1: {tenant: acme, groups: [hr]}\n")
    assert read_api_keys(tmp_path / "keys.yaml") == {"k1": Principal("acme", ("hr",))}
    (tmp_path / "bad.yaml").write_text("k1: {groups: [hr]}\n")
    with pytest.raises(ConfigError, match="needs a non-empty 'tenant'"):
        read_api_keys(tmp_path / "bad.yaml")
    with pytest.raises(ConfigError, match="serve.api_keys_file"):
        read_api_keys(None)


def test_questions_never_run_in_parallel_threads_through_one_answerer():
    """The server may take requests concurrently; ServedPipeline's lock serialises them (checked here on threads)."""
    from experiments.promoted import ServedPipeline

    active, peak = [0], [0]

    class Query:
        name = "stub"
        inputs = {"question": []}
        answer_output = None
        route_component = grader = context_output = retrieval_output = None

        def run(self, **_):
            active[0] += 1
            peak[0] = max(peak[0], active[0])
            time.sleep(0.05)
            active[0] -= 1
            return {}

        def answer(self, outputs):
            return None

        def documents_at(self, outputs, socket):
            return []

    class Indexed:
        query = Query()

    served = ServedPipeline(Indexed())
    threads = [threading.Thread(target=served.ask, args=("q",)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert peak[0] == 1
    with pytest.raises(UserError, match="pipeline stub has no 'filters' input"):  # never dropped silently
        served.ask("q", filters={"field": "meta.tenant", "operator": "==", "value": "a"})
