"""serve.cache (issue 41, section 3): the key, the bounds, and serve.py's app answering from it: hits marked and
counted, errors never stored, each scope its own entry on a real tenant-split demo pipeline, trace ids never
shared, and another served version never served a reply of the first."""

import json
import logging
import threading

import pytest
from fastapi.testclient import TestClient
from haystack import tracing

from experiments.datasets.demo import DEMO_DIR
from experiments.runs.config import validate
from experiments.runs.indexed import prepare_pipeline
from pipelines.errors import ConfigError, UserError
from serving.audit.checks import may_see
from serving.http.answer_cache import AnswerCache, cache_key, canonical, normalised
from serving.http.app import create_app
from serving.http.auth import bearer
from serving.http.routes import CACHE_HEADER
from serving.http.state import ServerState
from serving.online.traces import Traces
from serving.online.variants import Variant, assign
from serving.principals import Principal, scoped_filters
from serving.served_pipeline import ServedPipeline
from serving.settings import CacheSettings, ServeSettings, TraceSettings, compose_serve, serve_settings
from tests.support.shipped import composed
from tests.support.status_logged import StatusLogged

KEYS = {
    "k-acme": Principal("acme", subject="ana"),
    "k-acme-2": Principal("acme", subject="bea"),
    "k-globex": Principal("globex"),
    "k-initech-hr": Principal("initech", ("hr", "security"), subject="cy"),
    "k-initech-rh": Principal("initech", ("security", "hr"), subject="di"),
    "k-initech": Principal("initech"),
}
LOCAL = ("127.0.0.1", 50000)  # GET /metrics answers loopback clients
VARIANT = Variant("production", "models:/rag@production", "3", index="f" * 20)
LEAVE = "How many days of paid annual leave do full-time employees accrue?"
ON = CacheSettings(enabled=True)


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def key_of(
    principal: Principal | None,
    question: str = "q?",
    requested: dict | None = None,
    history=(),
    variant: Variant = VARIANT,
    stages: bool = False,
) -> str:
    return cache_key(variant, question, list(history), scoped_filters(principal, requested), stages)


# --- the key --------------------------------------------------------------------------------------------------


def test_the_key_is_the_scoped_filters_in_canonical_form_so_group_order_does_not_matter():
    assert key_of(KEYS["k-initech-hr"]) == key_of(KEYS["k-initech-rh"])  # same tenant and groups, other users
    assert key_of(KEYS["k-acme"]) == key_of(KEYS["k-acme-2"])
    scopes = [
        KEYS["k-acme"],
        KEYS["k-globex"],
        KEYS["k-initech"],
        KEYS["k-initech-hr"],
        Principal("initech", ("hr",)),
        Principal("acme", ("hr", "security")),
        None,
    ]
    assert len({key_of(principal) for principal in scopes}) == len(scopes)  # every other scope its own key


def test_a_clients_narrowing_filter_is_part_of_the_key_in_any_order():
    lang = {"field": "meta.lang", "operator": "==", "value": "en"}
    docs = {"field": "meta.doc_id", "operator": "in", "value": ["a.md", "b.md"]}
    both = {"operator": "AND", "conditions": [lang, docs]}
    reordered = {"operator": "AND", "conditions": [docs | {"value": ["b.md", "a.md"]}, lang]}
    acme = KEYS["k-acme"]
    assert key_of(acme, requested=both) == key_of(acme, requested=reordered)
    assert (
        len(
            {
                key_of(acme),
                key_of(acme, requested=lang),
                key_of(acme, requested=both),
                key_of(acme, requested=docs),
            }
        )
        == 4
    )
    # A list that is a value, not a set of values, keeps its order; every key of a condition is kept.
    ordered = {"field": "meta.path", "operator": "==", "value": ["a", "b"]}
    assert canonical(ordered) == ordered and canonical(ordered | {"value": ["b", "a"]}) != canonical(ordered)
    assert canonical({"field": "meta.x", "operator": "==", "value": 1}) != canonical(
        {"field": "meta.x", "operator": "==", "value": "1"}
    )


def test_questions_are_normalised_for_width_whitespace_and_case_but_keep_their_punctuation():
    assert normalised("  How many\u3000DAYS of leave?\n") == "how many days of leave?"
    assert normalised("ＡＢＣ？") == "abc?"  # full-width forms
    assert normalised("年假有多少天？") == "年假有多少天?"
    acme = KEYS["k-acme"]
    assert key_of(acme, "How  many days?") == key_of(acme, "how many days?")
    assert len({key_of(acme, q) for q in ("Is it 5.0?", "Is it 50?", "Is it 5.0!", "Is it not 5.0?")}) == 4


def test_the_history_the_variant_and_the_stages_option_are_part_of_the_key():
    acme = KEYS["k-acme"]
    turn = {"role": "user", "content": "We talk about Oslo."}
    assert key_of(acme, history=[turn]) == key_of(acme, history=[turn | {"content": "we talk  about OSLO."}])
    assert (
        key_of(acme, history=[turn]) != key_of(acme) != key_of(acme, history=[turn | {"role": "assistant"}])
    )
    others = [
        Variant("production", "models:/rag@production", "4", index="f" * 20),  # the alias moved
        Variant("production", "models:/rag@production", "3", index="e" * 20),  # another index
        Variant("challenger", "models:/rag@challenger", "3", index="f" * 20),
    ]
    assert len({key_of(acme, variant=v) for v in [VARIANT, *others]}) == 4
    assert key_of(acme, stages=True) != key_of(acme)


# --- the store --------------------------------------------------------------------------------------------------


def reply(text: str) -> dict:
    return {"answer": text, "refused": False, "citations": [], "documents": [], "stages_ms": {}}


def test_the_least_recently_used_reply_goes_first_when_the_entries_are_full():
    cache = AnswerCache(CacheSettings(enabled=True, max_entries=2))
    cache.put("a", reply("A"))
    cache.put("b", reply("B"))
    assert cache.get("a")["answer"] == "A"  # a is now the most recently used
    cache.put("c", reply("C"))
    assert cache.get("b") is None and cache.get("a")["answer"] == "A" and cache.get("c")["answer"] == "C"
    assert cache.counts() | {"bytes": 0} == {"hits": 3, "misses": 1, "evictions": 1, "entries": 2, "bytes": 0}


def test_the_bytes_bound_evicts_too_and_a_reply_larger_than_it_is_not_kept():
    size = len(json.dumps(reply("x" * 100)).encode())
    cache = AnswerCache(CacheSettings(enabled=True, max_bytes=2 * size + 10))
    for key in "abc":
        cache.put(key, reply(key * 100))
    assert cache.counts()["entries"] == 2 and cache.counts()["bytes"] == 2 * size and cache.get("a") is None
    cache.put("huge", reply("x" * 1000))
    assert cache.get("huge") is None and cache.counts()["entries"] == 2
    cache.put("b", reply("b" * 100))  # stored again: counted once
    assert cache.counts()["bytes"] == 2 * size


def test_a_reply_expires_after_its_ttl_and_a_caller_cannot_change_what_is_stored():
    now = [0.0]
    cache = AnswerCache(CacheSettings(enabled=True, ttl_s=10), clock=lambda: now[0])
    cache.put("a", reply("A"))
    cache.get("a")["answer"] = "changed"
    now[0] = 9.9
    assert cache.get("a")["answer"] == "A"
    now[0] = 10.0
    assert cache.get("a") is None and cache.counts()["evictions"] == 1 and cache.counts()["bytes"] == 0


def test_the_settings_are_checked_naming_the_key():
    settings = serve_settings(compose_serve(["serve.cache.enabled=true", "serve.cache.max_entries=5"]))
    assert settings.cache == CacheSettings(enabled=True, max_entries=5) and not ServeSettings().cache.enabled
    for override, key in (
        ("serve.cache.max_entries=0", "serve.cache.max_entries"),
        ("serve.cache.max_bytes=0", "serve.cache.max_bytes"),
        ("serve.cache.ttl_s=0", "serve.cache.ttl_s"),
    ):
        with pytest.raises(ConfigError, match=f"'{key}'"):
            serve_settings(compose_serve([override]))


# --- serve.py's app, with a recording answerer -----------------------------------------------------------------


class Recording:
    """Answers with the question and the scope it was given; `error` makes it fail."""

    def __init__(self, error: Exception | None = None):
        self.calls, self.error = [], error

    def ask(
        self, question, history=None, filters=None, stages=False, on_token=None, on_step=None, tracer=None
    ):
        self.calls.append(question)
        if self.error is not None:
            raise self.error
        if on_token is not None:
            on_token("re: ")
        return reply(f"re: {question} in {json.dumps(filters)}") | {"stages_ms": {"retriever": 1.0}}


def app(answerer, cache: CacheSettings = ON, **limits) -> TestClient:
    state = ServerState(answerer, "models:/rag@production")
    return TestClient(create_app(state, bearer(KEYS.get), ServeSettings(cache=cache, **limits)), client=LOCAL)


def test_a_repeated_question_is_answered_from_the_cache_marked_and_counted():
    answerer = Recording()
    api = app(answerer)
    first = api.post("/query", json={"question": LEAVE}, headers=auth("k-acme"))
    again = api.post("/query", json={"question": " " + LEAVE.upper()}, headers=auth("k-acme-2"))
    assert answerer.calls == [LEAVE]
    assert (first.headers[CACHE_HEADER], first.json()["cached"]) == ("miss", False)
    assert (again.headers[CACHE_HEADER], again.json()["cached"]) == ("hit", True)
    assert again.json()["answer"] == first.json()["answer"] and again.json()["stages_ms"] == {}
    assert again.json()["trace_id"] != first.json()["trace_id"]  # each request its own
    chat = api.post(
        "/v1/chat/completions",
        json={"messages": [{"role": "user", "content": LEAVE}]},
        headers=auth("k-acme"),
    )
    assert chat.headers[CACHE_HEADER] == "hit" and chat.json()["ragtune"]["cached"] is True
    assert chat.json()["choices"][0]["message"]["content"] == first.json()["answer"]
    exposition = api.get("/metrics").text
    for line in (
        "ragtune_cache_hits_total 2.0",
        "ragtune_cache_misses_total 1.0",
        "ragtune_cache_entries 1.0",
        "ragtune_cache_evictions_total 0.0",
        'ragtune_requests_total{status="200",variant="production"} 3.0',
    ):
        assert line in exposition, exposition
    assert "ragtune_cache" not in app(Recording(), CacheSettings()).get("/metrics").text
    assert (
        CACHE_HEADER
        not in app(Recording(), CacheSettings())
        .post("/query", json={"question": LEAVE}, headers=auth("k-acme"))
        .headers
    )


def test_a_streamed_request_is_stored_and_a_hit_streams_the_stored_reply_whole():
    answerer = Recording()
    api = app(answerer)
    streamed = api.post("/query", json={"question": LEAVE, "stream": True}, headers=auth("k-acme"))
    assert streamed.headers[CACHE_HEADER] == "miss" and "event: token" in streamed.text
    hit = api.post("/query", json={"question": LEAVE, "stream": True}, headers=auth("k-acme"))
    assert hit.headers[CACHE_HEADER] == "hit" and "event: token" not in hit.text and len(answerer.calls) == 1
    answer = json.loads(hit.text.split("event: answer\ndata: ")[1])
    assert (
        answer["cached"] is True
        and answer["answer"]
        == api.post("/query", json={"question": LEAVE}, headers=auth("k-acme")).json()["answer"]
    )
    chunks = api.post(
        "/v1/chat/completions",
        json={"messages": [{"role": "user", "content": LEAVE}], "stream": True},
        headers=auth("k-acme"),
    )
    assert chunks.headers[CACHE_HEADER] == "hit" and '"content": "re: How many' in chunks.text


@pytest.mark.parametrize(("error", "status"), [(RuntimeError("boom"), 500), (UserError("bad filter"), 400)])
def test_a_failed_answer_is_never_stored(error, status):
    answerer = Recording(error)
    api = app(answerer)
    for _ in range(2):
        assert api.post("/query", json={"question": LEAVE}, headers=auth("k-acme")).status_code == status
    assert len(answerer.calls) == 2 and "ragtune_cache_entries 0.0" in api.get("/metrics").text



def test_a_timed_out_answer_is_not_stored_though_its_pipeline_finishes_later():
    """The first answer is held until the server has logged its 504, then ends: the next asking runs again."""
    release = threading.Event()

    class Stuck(Recording):
        def ask(self, question, *args, **kwargs):
            if not self.calls:
                assert release.wait(30), "the server never logged its 504"
            return super().ask(question, *args, **kwargs)

    logger = logging.getLogger("ragtune.serve")
    level = logger.level
    logger.setLevel(logging.INFO)
    logger.addHandler(handler := StatusLogged(504, release))
    try:
        answerer = Stuck()
        api = app(answerer, timeout_s=0.2)
        assert api.post("/query", json={"question": LEAVE}, headers=auth("k-acme")).status_code == 504
        again = api.post("/query", json={"question": LEAVE}, headers=auth("k-acme"))
        assert again.json()["cached"] is False and len(answerer.calls) == 2
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        release.set()


def test_two_variants_never_share_an_entry_even_for_one_scope():
    """An A/B split: two users of one tenant and groups on different variants (other versions) each get their
    own variant's answer."""
    answerers = {"champion": Recording(), "challenger": Recording()}
    variants = [
        Variant(name, f"models:/rag@{name}", version, 0.5, answerers[name], index="f" * 20)
        for name, version in (("champion", "1"), ("challenger", "2"))
    ]
    users = [Principal("acme", subject=f"user{i}") for i in range(40)]
    split = {assign(variants, user, "", "ragtune").name: user for user in users}
    keys = {f"k-{name}": user for name, user in split.items()}
    api = TestClient(create_app(ServerState(variants=variants), bearer(keys.get), ServeSettings(cache=ON)))
    replies = {
        name: api.post("/query", json={"question": LEAVE}, headers=auth(f"k-{name}")).json() for name in split
    }
    assert {name: (r["variant"], r["cached"]) for name, r in replies.items()} == {
        "champion": ("champion", False),
        "challenger": ("challenger", False),
    }
    assert [len(a.calls) for a in answerers.values()] == [1, 1]


# --- traces and feedback ---------------------------------------------------------------------------------------


def test_a_hit_has_its_own_trace_which_only_its_asker_may_rate(mlflow_store, tmp_path, monkeypatch):
    _, client, _ = mlflow_store
    monkeypatch.setattr(
        tracing.tracer, "is_content_tracing_enabled", tracing.tracer.is_content_tracing_enabled
    )
    client.create_experiment("served", artifact_location=(tmp_path / "traces").as_uri())
    traces = Traces.for_model(TraceSettings(sample=1.0), "models:/rag/3", "served")
    api = TestClient(
        create_app(
            ServerState(Recording(), "models:/rag/3", traces), bearer(KEYS.get), ServeSettings(cache=ON)
        )
    )
    filled = api.post("/query", json={"question": LEAVE}, headers=auth("k-acme")).json()
    hit = api.post("/query", json={"question": LEAVE}, headers=auth("k-acme-2")).json()
    traces.drain()
    assert hit["cached"] and hit["trace_id"] != filled["trace_id"]
    tags = [client.get_trace(r["trace_id"]).info.tags for r in (filled, hit)]
    assert [(t["ragtune.cached"], t["ragtune.sampled"]) for t in tags] == [
        ("false", "true"),
        ("true", "false"),
    ]
    rate = {"rating": 1}
    assert (
        api.post(
            "/feedback", json=rate | {"trace_id": filled["trace_id"]}, headers=auth("k-acme-2")
        ).status_code
        == 404
    )
    assert (
        api.post("/feedback", json=rate | {"trace_id": hit["trace_id"]}, headers=auth("k-acme")).status_code
        == 404
    )
    assert (
        api.post("/feedback", json=rate | {"trace_id": hit["trace_id"]}, headers=auth("k-acme-2")).status_code
        == 202
    )


# --- a real tenant-split pipeline ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tenants(tmp_path_factory: pytest.TempPathFactory) -> ServedPipeline:
    """BM25 and the extractive answerer over the demo split among its three tenants, indexed once a module."""
    cache = tmp_path_factory.mktemp("cache")
    cfg = composed(
        "pipeline=bm25",
        "answer=extractive",
        "+pipeline.answer=${answer.stage}",
        f"paths.cache={cache}",
        f"dataset.meta_file={DEMO_DIR / 'tenants.jsonl'}",
    )
    return ServedPipeline.warm(prepare_pipeline(validate(cfg)))


@pytest.mark.parametrize(
    "order", [("k-acme", "k-globex", "k-initech-hr"), ("k-initech-hr", "k-globex", "k-acme")]
)
def test_the_same_question_asked_by_each_tenant_in_turn_gets_each_its_own_answer(tenants, order):
    state = ServerState(tenants, "models:/handbook@production")
    api = TestClient(create_app(state, bearer(KEYS.get), ServeSettings(cache=ON, debug=True)))
    sources = {d.id: d.meta for d in tenants.indexed.dataset.documents}
    answers = {}
    for key in order:
        got = api.post("/query", json={"question": LEAVE}, headers=auth(key)).json()
        assert got["cached"] is False, key  # another scope: never the first tenant's entry
        shown = [*got["documents"], *got["citations"], *(r for refs in got["stages"].values() for r in refs)]
        assert shown and all(may_see(KEYS[key], sources[r["doc_id"]]) for r in shown), key
        answers[key] = got["answer"]
    assert answers["k-acme"] != answers["k-globex"] and "20 days" in answers["k-acme"]
    twin = api.post("/query", json={"question": LEAVE}, headers=auth("k-acme-2")).json()
    assert twin["cached"] is True and twin["answer"] == answers["k-acme"]
