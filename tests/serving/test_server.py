"""The HTTP layer's control flow with a recording answerer; tests/test_serving.py serves a real promoted run."""

import json
import logging
import threading
import time

import jwt as pyjwt
import pytest
from fastapi.testclient import TestClient
from haystack import Document
from haystack.core.errors import PipelineRuntimeError
from haystack.errors import FilterError

from components.retrievers.document_masks import DocumentMasks
from pipelines.access import IndexAccess
from pipelines.errors import ConfigError, UserError
from serving.http.app import create_app
from serving.http.auth import authenticator, bearer, proxy_headers
from serving.http.state import ServerState
from serving.principals import Principal, key_subject, read_api_keys, scoped_filters
from serving.settings import JwtSettings, ServeSettings
from tests.support.status_logged import StatusLogged

KEYS = {"k-acme": Principal("acme", ("hr",)), "k-beta": Principal("beta")}
AUTH = {"Authorization": "Bearer k-acme"}


class RecordingAnswerer:
    """Records each question; with `blocking`, each answer waits until `release` is set (`started` says one began)."""

    def __init__(self, blocking: bool = False):
        self.calls, self.blocking = [], blocking
        self.started, self.release = threading.Event(), threading.Event()

    def ask(self, question, history=None, filters=None, stages=False, on_token=None, on_step=None):
        self.calls.append({"question": question, "history": history, "filters": filters, "stages": stages})
        self.started.set()
        if self.blocking:
            assert self.release.wait(timeout=30), "the test never released the answer"
        return {"answer": f"re: {question}", "refused": False, "citations": [], "documents": [], "stages_ms": {}}


def client(answerer=None, **limits) -> TestClient:
    state = ServerState(answerer, "models:/rag@production")
    return TestClient(create_app(state, bearer(KEYS.get), ServeSettings(**limits)))


def test_readiness_waits_for_the_model_and_health_does_not():
    waiting = client(None)
    assert waiting.get("/healthz").status_code == 200
    assert waiting.get("/readyz").status_code == 503
    assert waiting.post("/query", json={"question": "hi"}, headers=AUTH).status_code == 503
    assert client(RecordingAnswerer()).get("/readyz").json() == {"ready": True, "model": "models:/rag@production",
                                                                 "variants": {"production": ""}}


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
    masks = DocumentMasks(documents)
    assert masks.mask(sent).tolist() == [False, False, False, False]
    narrowed = {"field": "meta.tenant", "operator": "==", "value": "acme"}
    assert masks.mask(scoped_filters(KEYS["k-acme"], narrowed)).tolist() == [False, True, False, False]
    # An ACL without a tenant names nobody's groups: hidden from all.
    assert masks.mask(scoped_filters(KEYS["k-beta"], None)).tolist() == [True, False, True, False]


@pytest.mark.parametrize(("principal", "visible"), [
    (Principal("acme"), [True, True, False, False, False, False]),
    (Principal("acme", ("hr",)), [True, True, True, False, False, False]),
    (Principal("acme", ("it", "hr")), [True, True, True, True, False, False]),
    (Principal("beta", ("hr",)), [True, False, False, False, True, False]),  # acme's hr group is not beta's
])
def test_group_acls_narrow_a_tenant(principal, visible):
    metas = ({}, {"tenant": "acme"}, {"tenant": "acme", "acl": ["hr"]}, {"tenant": "acme", "acl": ["it", "ops"]},
             {"tenant": "beta", "acl": ["hr"]}, {"acl": ["hr"]})
    masks = DocumentMasks([Document(content="x", meta=m) for m in metas])
    assert masks.mask(scoped_filters(principal, None)).tolist() == visible


@pytest.mark.parametrize(("body", "status", "message"), [
    ({"question": "  "}, 400, "question: must not be empty"),
    ({"question": "x" * 101}, 413, "question: 101 characters, the limit is 100"),
    ({"question": "q", "history": [{"role": "user", "content": "h"}] * 4}, 413, "history: 4 turns, the limit is 3"),
    ({"question": "q", "tenant": "beta"}, 400, "tenant: Extra inputs are not permitted"),
    ({"question": "q", "filters": {"operator": "OR", "conditions": []}}, 400, "filters: Value error, a logical filter"),
    ({"question": "q", "filters": {"$or": []}}, 400, "filters: Value error, unknown filter operator"),
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

        def ask(self, question, history=None, filters=None, stages=False, on_token=None, on_step=None):
            raise self.error

    broken = client(Failing(RuntimeError("boom"))).post("/query", json={"question": "q"}, headers=AUTH)
    assert broken.status_code == 500 and "internal error (trace_id " in broken.json()["error"]
    assert '"status": 500' in caplog.text and "boom" in caplog.text
    refused = client(Failing(UserError("pipeline x has no 'filters' input"))).post("/query", json={"question": "q"},
                                                                                 headers=AUTH)
    assert refused.status_code == 400 and "no 'filters' input" in refused.json()["error"]
    # One line for the request, with its reason: the refusal handler writes no second one.
    lines = [json.loads(r.getMessage()) for r in caplog.records if refused.json()["request_id"] in r.getMessage()]
    assert [(line["status"], line["refused"]) for line in lines] == [(400, "pipeline x has no 'filters' input")]
    # A component's FilterError (Weaviate refusing a filter) reaches the server wrapped by the pipeline.
    cause = FilterError("Weaviate refused the query's filters")
    wrapped = PipelineRuntimeError.from_exception("bm25", object, cause)
    wrapped.__cause__ = cause  # as the pipeline raises it: `raise ... from error`
    refused = client(Failing(wrapped)).post("/query", json={"question": "q"}, headers=AUTH)
    assert refused.status_code == 400 and "Weaviate refused" in refused.json()["error"]



def test_a_slow_answer_times_out():
    """The answer is held until the server has logged its 504: the request cannot end before, nor the test wait."""
    answerer = RecordingAnswerer(blocking=True)
    handler = StatusLogged(504, answerer.release)
    logger, level = logging.getLogger("ragtune.serve"), logging.getLogger("ragtune.serve").level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        assert client(answerer, timeout_s=0.2).post("/query", json={"question": "q"}, headers=AUTH).status_code == 504
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        answerer.release.set()


def test_requests_beyond_the_pending_bound_are_refused_while_one_runs():
    answerer = RecordingAnswerer(blocking=True)
    api = client(answerer, max_pending=1)
    codes = []
    running = threading.Thread(target=lambda: codes.append(api.post("/query", json={"question": "q"},
                                                                     headers=AUTH).status_code))
    running.start()
    try:
        assert answerer.started.wait(timeout=30)
        codes += [api.post("/query", json={"question": "q"}, headers=AUTH).status_code for _ in range(2)]
    finally:
        answerer.release.set()
        running.join()
    assert codes == [503, 503, 200]


def test_the_chat_endpoint_takes_history_from_the_messages():
    answerer = RecordingAnswerer()
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"},
                {"role": "assistant", "content": "hello"}, {"role": "user", "content": "Hotel limit?"}]
    reply = client(answerer).post("/v1/chat/completions", json={"model": "x", "messages": messages}, headers=AUTH)
    assert reply.json()["choices"][0]["message"] == {"role": "assistant", "content": "re: Hotel limit?"}
    assert answerer.calls[-1]["question"] == "Hotel limit?" and len(answerer.calls[-1]["history"]) == 3
    client(answerer).post("/v1/chat/completions", json={"messages": messages, "stream": True}, headers=AUTH)
    assert answerer.calls[-1]["question"] == "Hotel limit?" and len(answerer.calls[-1]["history"]) == 3


def test_header_auth_is_refused_off_loopback_unless_the_proxy_is_trusted():
    with pytest.raises(ConfigError, match="bind serve.host to loopback"):
        proxy_headers("0.0.0.0", trust_proxy=False)
    authenticate = proxy_headers("0.0.0.0", trust_proxy=True)
    api = TestClient(create_app(ServerState(RecordingAnswerer()), authenticate, ServeSettings()))
    assert api.post("/query", json={"question": "q"}).status_code == 401
    assert api.post("/query", json={"question": "q"}, headers={"X-Tenant": "acme", "X-Groups": "hr, it"}).status_code == 200


def test_the_api_keys_file_is_checked_when_read(tmp_path):
    (tmp_path / "keys.yaml").write_text("k1: {tenant: acme, groups: [hr]}\nk2: {tenant: acme, user: ana}\n")
    assert read_api_keys(tmp_path / "keys.yaml") == {"k1": Principal("acme", ("hr",), subject=key_subject("k1")),
                                                     "k2": Principal("acme", (), subject="ana")}
    (tmp_path / "bad.yaml").write_text("k1: {groups: [hr]}\n")
    with pytest.raises(ConfigError, match="needs a non-empty 'tenant'"):
        read_api_keys(tmp_path / "bad.yaml")
    with pytest.raises(ConfigError, match="serve.api_keys_file"):
        read_api_keys(None)


def test_a_request_log_line_holds_latency_per_stage_and_text_only_in_debug(caplog):
    caplog.set_level(logging.INFO, "ragtune.serve")

    class Timed(RecordingAnswerer):
        def ask(self, question, history=None, filters=None, stages=False, on_token=None, on_step=None):
            return super().ask(question, history, filters, stages) | {"stages_ms": {"bm25": 1.5, "fusion": 0.2}}

    answerer = Timed()
    client(answerer).post("/query", json={"question": "secret question"}, headers=AUTH)
    record = json.loads(caplog.records[-1].getMessage())
    assert record["stages_ms"] == {"bm25": 1.5, "fusion": 0.2} and "question" not in record
    assert answerer.calls[-1]["stages"] is False
    client(answerer, debug=True).post("/query", json={"question": "secret question"}, headers=AUTH)
    assert json.loads(caplog.records[-1].getMessage())["question"] == "secret question"
    assert answerer.calls[-1]["stages"] is True


def jwt_client(tmp_path, answerer=None, **jwt_settings) -> TestClient:
    (tmp_path / "secret").write_text("s3cret-" * 6)
    settings = ServeSettings(auth="jwt", jwt=JwtSettings(key_file=str(tmp_path / "secret"), algorithms=["HS256"],
                                                         **jwt_settings))
    return TestClient(create_app(ServerState(answerer or RecordingAnswerer()), authenticator(settings), settings))


def token(claims: dict, key="s3cret-" * 6, algorithm: str = "HS256") -> dict:
    claims = {"exp": int(time.time()) + 60, **claims}
    return {"Authorization": f"Bearer {pyjwt.encode(claims, key, algorithm=algorithm)}"}


def test_a_signed_token_carries_the_principal(tmp_path):
    answerer = RecordingAnswerer()
    api = jwt_client(tmp_path, answerer, audience="ragtune", groups_claim="roles")
    ok = api.post("/query", json={"question": "q"}, headers=token({"tenant": "acme", "roles": ["hr"], "aud": "ragtune"}))
    assert ok.status_code == 200
    assert answerer.calls[-1]["filters"] == scoped_filters(Principal("acme", ("hr",)), None)


@pytest.mark.parametrize("claims", [
    {"tenant": "acme", "aud": "ragtune", "exp": int(time.time()) - 10},  # expired
    {"tenant": "acme", "aud": "other"},  # another audience
    {"tenant": "acme"},  # no audience
    {"groups": ["hr"], "aud": "ragtune"},  # no tenant
    {"tenant": "acme", "groups": "hr", "aud": "ragtune"},  # groups not a list
])
def test_a_token_that_fails_any_check_is_a_401(tmp_path, claims):
    assert jwt_client(tmp_path, audience="ragtune").post("/query", json={"question": "q"},
                                                         headers=token(claims)).status_code == 401


def test_a_forged_or_unsigned_token_is_a_401(tmp_path):
    api = jwt_client(tmp_path)
    claims = {"tenant": "acme"}
    assert api.post("/query", json={"question": "q"}, headers=token(claims, key="guess-" * 6)).status_code == 401
    unsigned = pyjwt.encode({"exp": int(time.time()) + 60, **claims}, None, algorithm="none")
    assert api.post("/query", json={"question": "q"}, headers={"Authorization": f"Bearer {unsigned}"}).status_code == 401


def test_a_token_signed_with_the_issuers_private_key_is_checked_with_its_public_key(tmp_path):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public = private.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    (tmp_path / "issuer.pem").write_bytes(public)
    settings = ServeSettings(auth="jwt", jwt=JwtSettings(key_file=str(tmp_path / "issuer.pem"), issuer="https://idp"))
    answerer = RecordingAnswerer()
    api = TestClient(create_app(ServerState(answerer), authenticator(settings), settings))
    headers = token({"tenant": "beta", "groups": ["it"], "iss": "https://idp"}, key=private, algorithm="RS256")
    assert api.post("/query", json={"question": "q"}, headers=headers).status_code == 200
    assert answerer.calls[-1]["filters"] == scoped_filters(Principal("beta", ("it",)), None)


@pytest.mark.parametrize(("jwt_settings", "message"), [
    ({"key_file": None}, "serve.jwt.key_file"),
    ({"key_file": "/no/such.pem"}, "cannot read /no/such.pem"),
    ({"key_file": "k", "algorithms": ["none"]}, "'none' is never accepted"),
    ({"key_file": "k", "algorithms": ["HS256", "RS256"]}, "give one family"),
])
def test_jwt_settings_are_checked_at_start(jwt_settings, message):
    with pytest.raises(ConfigError, match=message):
        authenticator(ServeSettings(auth="jwt", jwt=JwtSettings(**jwt_settings)))


@pytest.mark.parametrize(("algorithm", "key", "message"), [
    ("RS256", b"not a pem key", "is not a key for RS256"),
    ("HS256", b"", "holds 0 bytes; an HS256 secret needs at least 32"),
    ("HS256", b"short", "holds 5 bytes"),
    ("HS256", b"-----BEGIN PUBLIC KEY-----\nMFkw\n-----END PUBLIC KEY-----", "is not a key for HS256"),
    ("XS999", b"x" * 64, "unknown algorithm 'XS999'"),
])
def test_a_jwt_key_that_cannot_verify_its_algorithm_fails_at_start(tmp_path, algorithm, key, message):
    (tmp_path / "key").write_bytes(key)
    with pytest.raises(ConfigError, match=message):
        authenticator(ServeSettings(auth="jwt", jwt=JwtSettings(key_file=str(tmp_path / "key"), algorithms=[algorithm])))


def test_a_private_key_where_the_issuers_public_key_goes_fails_at_start(tmp_path):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    (tmp_path / "key.pem").write_bytes(private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                             serialization.NoEncryption()))
    with pytest.raises(ConfigError, match="is a private key; give the issuer's public key"):
        authenticator(ServeSettings(auth="jwt", jwt=JwtSettings(key_file=str(tmp_path / "key.pem"))))


def test_an_unknown_auth_is_named():
    with pytest.raises(ConfigError, match="serve.auth': must be api_keys, jwt or header"):
        authenticator(ServeSettings(auth="oauth"))  # a record built in code, past the config's check
    from hydra.errors import ConfigCompositionException

    from serving.settings import compose_serve

    with pytest.raises(ConfigCompositionException, match="serve.auth=oauth") as failed:
        compose_serve(["serve.auth=oauth"])
    assert "expected one of [api_keys, jwt, header]" in str(failed.value.__cause__)


def test_questions_never_run_in_parallel_threads_through_one_answerer():
    """The server may take requests concurrently; ServedPipeline's lock serialises them (checked here on threads)."""
    from pipelines.built import BuiltPipeline
    from serving.served_pipeline import ServedPipeline

    active, peak, overlap = [0], [0], threading.Event()

    class Query:
        name = "stub"
        inputs = {"question": []}
        answer_output = None
        route_component = grader = context_output = retrieval_output = degraded_output = None
        request_inputs = BuiltPipeline.request_inputs
        degraded = BuiltPipeline.degraded

        def run(self, **_):
            active[0] += 1
            peak[0] = max(peak[0], active[0])
            if active[0] > 1:
                overlap.set()
            overlap.wait(timeout=0.2)  # without the lock, another thread's question arrives here meanwhile
            active[0] -= 1
            return {}

        def answer(self, outputs):
            return None

        def documents_at(self, outputs, socket):
            return []

    class Indexed:
        query = Query()

    served = ServedPipeline(Indexed(), IndexAccess())
    errors = []

    def ask():
        try:
            served.ask("q")
        except Exception as e:  # a thread's error would otherwise only be a warning
            errors.append(e)

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and peak[0] == 1
    with pytest.raises(UserError, match="pipeline stub has no 'filters' input"):  # never dropped silently
        served.ask("q", filters={"field": "meta.tenant", "operator": "==", "value": "a"})


class StreamingAnswerer(RecordingAnswerer):
    """Hands its answer over in pieces, as a generator's streaming callback does, then replies; or fails midway."""

    def __init__(self, pieces=("Fifteen ", "days", "."), fail: Exception | None = None):
        super().__init__()
        self.pieces, self.fail = pieces, fail

    def ask(self, question, history=None, filters=None, stages=False, on_token=None, on_step=None):
        for piece in self.pieces:
            if on_token is not None:
                on_token(piece)
        if self.fail is not None:
            raise self.fail
        return {"answer": "".join(self.pieces), "refused": False, "citations": [], "documents": [], "stages_ms": {}}


def events(response):
    """(event, data) pairs of a server-sent event stream; OpenAI's chunks have no event name."""
    parsed = []
    for block in response.text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines())
        data = lines["data"]
        parsed.append((lines.get("event"), data if data == "[DONE]" else json.loads(data)))
    return parsed


def test_query_streams_tokens_then_the_verified_reply():
    response = client(StreamingAnswerer()).post("/query", json={"question": "leave?", "stream": True}, headers=AUTH)
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
    stream = events(response)
    assert [data["text"] for event, data in stream if event == "token"] == ["Fifteen ", "days", "."]
    assert stream[-1][0] == "answer" and stream[-1][1]["answer"] == "Fifteen days." and stream[-1][1]["trace_id"]


class AgentAnswerer(RecordingAnswerer):
    """Reports its tool calls as an agent's pipeline does (serving.served_pipeline._agent_step), then replies."""

    STEPS = ({"tool": "kb_search", "arguments": {"query": "leave"}, "error": False, "observation": "[en/a.md] 20 days"},
             {"tool": "sql_query", "arguments": {"query": "DROP TABLE x"}, "error": False, "observation": "refused"})

    def ask(self, question, history=None, filters=None, stages=False, on_token=None, on_step=None):
        for step in self.STEPS:
            if on_step is not None:
                on_step(step)
        return {"answer": "20 days", "refused": False, "citations": [], "documents": [], "stages_ms": {},
                "agent": {"steps": 3, "tools": ["kb_search", "sql_query", "final_answer"],
                          "tool_calls": {"kb_search": 1, "sql_query": 1, "final_answer": 1}, "stop_reason": "final_answer",
                          "answered_by": "model"}}


def test_query_streams_an_agents_steps_in_order_before_its_reply():
    stream = events(client(AgentAnswerer()).post("/query", json={"question": "leave?", "stream": True}, headers=AUTH))
    assert [event for event, _ in stream] == ["step", "step", "answer"]
    assert [data for event, data in stream if event == "step"] == list(AgentAnswerer.STEPS)
    assert stream[-1][1]["agent"]["stop_reason"] == "final_answer"
    reply = client(AgentAnswerer()).post("/query", json={"question": "leave?"}, headers=AUTH).json()
    assert reply["agent"]["tools"] == ["kb_search", "sql_query", "final_answer"]
    chat = client(AgentAnswerer()).post(
        "/v1/chat/completions", json={"messages": [{"role": "user", "content": "leave?"}], "stream": True}, headers=AUTH
    )
    chunks = [data for _, data in events(chat)]  # OpenAI's chunks have no place for steps
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": "20 days"} and len(chunks) == 3


def test_chat_streams_openai_chunks_and_the_reply_in_the_last():
    response = client(StreamingAnswerer()).post(
        "/v1/chat/completions", json={"messages": [{"role": "user", "content": "leave?"}], "stream": True}, headers=AUTH
    )
    chunks = [data for _, data in events(response)]
    assert chunks[-1] == "[DONE]"
    assert [c["choices"][0]["delta"].get("content") for c in chunks[:3]] == ["Fifteen ", "days", "."]
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant" and "role" not in chunks[1]["choices"][0]["delta"]
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop" and chunks[-2]["ragtune"]["answer"] == "Fifteen days."
    assert len({c["id"] for c in chunks[:-1]}) == 1 and all(c["object"] == "chat.completion.chunk" for c in chunks[:-1])


def test_an_answerer_that_streams_nothing_still_streams_its_answer_as_one_chunk():
    """Span and extractive answers generate no tokens: stream=true still works, the answer comes whole."""
    response = client(RecordingAnswerer()).post(
        "/v1/chat/completions", json={"messages": [{"role": "user", "content": "q"}], "stream": True}, headers=AUTH
    )
    chunks = [data for _, data in events(response)]
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": "re: q"} and chunks[-1] == "[DONE]"
    stream = events(client(RecordingAnswerer()).post("/query", json={"question": "q", "stream": True}, headers=AUTH))
    assert [event for event, _ in stream] == ["answer"]


def test_a_refused_stream_is_a_plain_http_error_before_any_event():
    assert client(StreamingAnswerer()).post("/query", json={"question": "q", "stream": True}).status_code == 401
    long = client(StreamingAnswerer(), max_question_chars=3).post(
        "/query", json={"question": "four", "stream": True}, headers=AUTH
    )
    assert long.status_code == 413 and "limit is 3" in long.json()["error"]
    failing = client(StreamingAnswerer(pieces=(), fail=UserError("no 'filters' input")))
    assert failing.post("/query", json={"question": "q", "stream": True}, headers=AUTH).status_code == 400


def test_a_failure_after_the_first_token_ends_the_stream_with_an_error_event(caplog):
    answerer = StreamingAnswerer(fail=RuntimeError("boom"))
    stream = events(client(answerer).post("/query", json={"question": "q", "stream": True}, headers=AUTH))
    assert [event for event, _ in stream] == ["token", "token", "token", "error"]
    assert stream[-1][1]["status"] == 500 and "trace_id" in stream[-1][1]["error"]
    chat = client(answerer).post(
        "/v1/chat/completions", json={"messages": [{"role": "user", "content": "q"}], "stream": True}, headers=AUTH
    )
    assert [data for _, data in events(chat)][-2]["error"]["code"] == 500


@pytest.mark.parametrize("headers", [
    [("authorization", "Bearer k-acme"), ("authorization", "Bearer k-beta")],
    [("authorization", "Bearer k-acme"), ("x-tenant", "beta"), ("x-tenant", "acme")],
    [("authorization", "Bearer k-acme"), ("x-groups", "managers"), ("x-groups", "")],
])
def test_an_identity_header_sent_twice_is_a_400_before_anything_runs(headers):
    answerer = RecordingAnswerer()
    reply = client(answerer).post("/query", json={"question": "q"}, headers=headers)
    assert reply.status_code == 400 and "is sent more than once" in reply.json()["error"]
    assert answerer.calls == []


def test_duplicate_proxy_headers_never_pick_one_tenant():
    answerer = RecordingAnswerer()
    api = TestClient(create_app(ServerState(answerer), proxy_headers("127.0.0.1", False), ServeSettings()))
    reply = api.post("/query", json={"question": "q"}, headers=[("x-tenant", "globex"), ("x-tenant", "acme")])
    assert reply.status_code == 400 and answerer.calls == []


DEEP = {"field": "meta.a", "operator": "==", "value": 1}
for _ in range(399):
    DEEP = {"operator": "NOT", "conditions": [DEEP]}


@pytest.mark.parametrize(("filters", "message"), [
    ({"field": "meta.acl", "operator": ">", "value": [1]}, "compares with a number or an ISO date string"),
    ({"field": "meta.tenant", "operator": "==", "value": ["acme", "beta"]}, "use 'in' for a list"),
    ({"field": "meta.tenant", "operator": "in", "value": [["acme"]]}, "the list holds strings, numbers"),
    ({"field": "meta.x", "operator": "==", "value": {"$ne": 1}}, "not dict"),
    ({"field": "content", "operator": "==", "value": "x"}, "a client filters on metadata"),
    ({"field": "meta.x", "operator": "<", "value": True}, "compares with a number"),
    (DEEP, "nested deeper than 8 levels"),
    ({"operator": "OR", "conditions": [{"field": f"meta.f{i}", "operator": "==", "value": 1} for i in range(65)]},
     "more than 64 fields"),
])
def test_a_filter_outside_the_schema_is_a_400_whatever_the_documents(filters, message):
    answerer = RecordingAnswerer()
    reply = client(answerer).post("/query", json={"question": "q", "filters": filters}, headers=AUTH)
    assert reply.status_code == 400 and message in reply.json()["error"], reply.json()
    assert answerer.calls == []


def test_serve_filter_fields_narrows_which_fields_a_client_may_name():
    api = client(RecordingAnswerer(), filter_fields=["meta.lang"])
    ok = {"field": "meta.lang", "operator": "==", "value": "en"}
    assert api.post("/query", json={"question": "q", "filters": ok}, headers=AUTH).status_code == 200
    other = {"field": "meta.tenant", "operator": "==", "value": "acme"}
    reply = api.post("/query", json={"question": "q", "filters": other}, headers=AUTH)
    assert reply.status_code == 400 and "not one of serve.filter_fields" in reply.json()["error"]


@pytest.mark.parametrize(("path", "body"), [
    ("/query", '{"question": "\\ud800"}'),
    ("/query", '{"question": "q", "history": [{"role": "user", "content": "\\udfff"}]}'),
    ("/query", '{"question": "q", "filters": {"field": "meta.\\ud800", "operator": "==", "value": 1}}'),
    ("/v1/chat/completions", '{"messages": [{"role": "user", "content": "\\ud800"}]}'),
])
def test_a_lone_surrogate_is_a_400(path, body):
    answerer = RecordingAnswerer()
    reply = client(answerer).post(path, content=body.encode(), headers=AUTH | {"Content-Type": "application/json"})
    assert reply.status_code == 400 and "invalid Unicode" in reply.json()["error"]
    assert answerer.calls == []


def test_a_body_over_the_limit_is_a_413_before_it_is_read():
    api = client(RecordingAnswerer(), max_body_bytes=1000)
    big = {"question": "q" * 2000}
    assert api.post("/query", json=big, headers=AUTH).status_code == 413

    def chunks():  # no Content-Length: refused once the bytes received pass the limit
        yield b'{"question": "'
        for _ in range(100):
            yield b"q" * 100
        yield b'"}'

    reply = api.post("/query", content=chunks(), headers=AUTH | {"Content-Type": "application/json"})
    assert reply.status_code == 413 and "serve.max_body_bytes (1000 bytes)" in reply.json()["error"]


def test_every_refused_request_is_logged_with_its_principal_reason_and_request_id(caplog):
    caplog.set_level(logging.INFO, "ragtune.serve")
    api = client(RecordingAnswerer())
    reply = api.post("/query", json={"question": "q"}, headers={"Authorization": "Bearer nope"})
    logged = json.loads(caplog.records[-1].getMessage())
    assert reply.status_code == 401 and logged == {
        "request_id": reply.json()["request_id"], "tenant": "anonymous", "status": 401,
        "refused": "unauthenticated: the credentials are not valid", "path": "/query"}
    reply = api.post("/query", json={"question": "q", "tenant": "beta"}, headers=AUTH)
    logged = json.loads(caplog.records[-1].getMessage())
    assert logged["tenant"] == "acme" and logged["status"] == 400 and "tenant: Extra inputs" in logged["refused"]
    assert logged["request_id"] == reply.json()["request_id"]


def test_serve_anonymous_public_answers_without_credentials_from_public_documents_only():
    answerer = RecordingAnswerer()
    api = client(answerer, anonymous="public")
    assert api.post("/query", json={"question": "q"}).status_code == 200
    assert answerer.calls[-1]["filters"] == scoped_filters(None, None)
    assert api.post("/query", json={"question": "q"}, headers={"Authorization": "Bearer nope"}).status_code == 401


def test_openapi_describes_the_requests_the_replies_and_the_refusals():
    spec = client(RecordingAnswerer()).get("/openapi.json").json()
    schemas = spec["components"]["schemas"]
    assert {"QueryRequest", "QueryReply", "ChatCompletion", "Citation", "Refusal"} <= set(schemas)
    responses = spec["paths"]["/query"]["post"]["responses"]
    assert responses["200"]["content"]["application/json"]["schema"]["$ref"].endswith("/QueryReply")
    assert {"400", "401", "413"} <= set(responses)
    assert set(schemas["QueryReply"]["required"]) >= {"answer", "refused", "citations", "documents", "trace_id"}


def test_a_reply_that_strays_from_its_model_is_the_servers_fault_not_the_clients():
    class Broken(RecordingAnswerer):
        def ask(self, question, history=None, filters=None, stages=False, on_token=None, on_step=None):
            return {"answer": 3}

    with pytest.raises(Exception, match="validation error"):
        client(Broken()).post("/query", json={"question": "q"}, headers=AUTH)
