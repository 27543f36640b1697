"""serve.variants (A/B) and serve.shadow: sticky assignment, replies and traces that name their variant, and a
shadow that answers unseen, keeps the request's scope, and is shed rather than waited for."""

import threading
from collections import Counter

import pytest
from fastapi.testclient import TestClient
from haystack import tracing

from pipelines.errors import ConfigError
from serving.http.app import create_app
from serving.http.auth import bearer
from serving.http.state import ServerState
from serving.online.traces import Traces
from serving.online.variants import Variant, assign
from serving.principals import Principal, scoped_filters
from serving.serve_command import variants_of
from serving.settings import ServeSettings, TraceSettings, compose_serve, serve_settings

KEYS = {"k-acme": Principal("acme", ("hr",), subject="ana"), "k-beta": Principal("beta", subject="bo")}
ACME, BETA = {"Authorization": "Bearer k-acme"}, {"Authorization": "Bearer k-beta"}
LOCAL = ("127.0.0.1", 50000)  # GET /metrics answers loopback clients
QUESTION = "How many days of paid annual leave do full-time employees accrue?"


def users(n: int) -> list[Principal]:
    return [Principal("acme", ("hr",), subject=f"user{i}") for i in range(n)]


def test_a_user_keeps_one_variant_and_the_weights_split_the_users():
    variants = [Variant("champion", "", weight=0.9), Variant("challenger", "", weight=0.1)]
    for user in users(50):
        assert len({assign(variants, user, f"request-{i}", "s").name for i in range(20)}) == 1
    shares = Counter(assign(variants, user, "r", "s").name for user in users(4000))
    assert 0.87 < shares["champion"] / 4000 < 0.93
    reshuffled = [assign(variants, user, "r", "other salt").name for user in users(400)]
    assert reshuffled != [assign(variants, user, "r", "s").name for user in users(400)]
    off = [Variant("champion", "", weight=1.0), Variant("challenger", "", weight=0.0)]
    assert {assign(off, user, "r", "s").name for user in users(400)} == {"champion"}


def test_anonymous_requests_are_drawn_by_request_id():
    variants = [Variant("champion", "", weight=0.5), Variant("challenger", "", weight=0.5)]
    assert {assign(variants, None, f"request-{i}", "s").name for i in range(50)} == {"champion", "challenger"}


def test_variants_are_set_per_alias_on_the_command_line_and_checked():
    settings = serve_settings(compose_serve(["model=models:/handbook", "serve.variants.champion=0.9",
                                             "serve.variants.challenger=0.1", "serve.shadow=canary"]))
    assert settings.variants == {"champion": 0.9, "challenger": 0.1} and settings.shadow == "canary"
    with pytest.raises(ConfigError, match="'serve.variants': weights must be >= 0"):
        serve_settings(compose_serve(["serve.variants.a=0", "serve.variants.b=0"]))
    with pytest.raises(ConfigError, match="'serve.shadow': 'a' is also in serve.variants"):
        serve_settings(compose_serve(["serve.variants.a=1", "serve.shadow=a"]))
    with pytest.raises(ConfigError, match="serve model=models:/NAME, not runs:/r1/ragtune"):
        variants_of("runs:/r1/ragtune", ServeSettings(shadow="challenger"))
    with pytest.raises(ConfigError, match=r"give the model without one \(model=models:/handbook\)"):
        variants_of("models:/handbook@production", ServeSettings(variants={"champion": 1.0}))


def test_each_alias_is_looked_up_in_the_registry(mlflow_store, tmp_path):
    _, client, _ = mlflow_store
    client.create_registered_model("handbook")
    for alias in ("champion", "challenger", "canary"):
        version = client.create_model_version("handbook", (tmp_path / alias).as_uri()).version
        client.set_registered_model_alias("handbook", alias, version)
    served, shadow = variants_of("models:/handbook", ServeSettings(variants={"champion": 3, "challenger": 1},
                                                                  shadow="canary"))
    assert [(v.name, v.uri, v.version, v.weight) for v in served] == [
        ("champion", "models:/handbook@champion", "1", 3), ("challenger", "models:/handbook@challenger", "2", 1)]
    assert shadow is not None and (shadow.name, shadow.version) == ("canary", "3")


@pytest.fixture
def traced(mlflow_store, tmp_path, monkeypatch):
    _, client, _ = mlflow_store
    monkeypatch.setattr(tracing.tracer, "is_content_tracing_enabled", tracing.tracer.is_content_tracing_enabled)
    client.create_experiment("served", artifact_location=(tmp_path / "traces").as_uri())
    return Traces.for_model(TraceSettings(content="full"), "models:/handbook", "served"), client


def test_replies_traces_and_metrics_name_the_variant_that_answered(traced, bm25):
    traces, client = traced
    variants = [Variant("champion", "models:/handbook@champion", "1", 0.5, bm25),
                Variant("challenger", "models:/handbook@challenger", "2", 0.5, bm25)]
    state = ServerState(traces=traces, variants=variants)
    api = TestClient(create_app(state, bearer(KEYS.get), ServeSettings()), client=LOCAL)
    replies = {name: api.post("/query", json={"question": QUESTION}, headers=headers).json()
               for name, headers in (("acme", ACME), ("beta", BETA))}
    expected = {name: assign(variants, KEYS[key], "", "ragtune") for name, key in (("acme", "k-acme"),
                                                                                   ("beta", "k-beta"))}
    traces.drain()
    for name, reply in replies.items():
        assert (reply["variant"], reply["model_version"]) == (expected[name].name, expected[name].version)
        tags = client.get_trace(reply["trace_id"]).info.tags
        assert (tags["ragtune.variant"], tags["ragtune.model_version"]) == (reply["variant"], reply["model_version"])
        assert tags["ragtune.shadow"] == "false"
    assert api.get("/readyz").json() == {"ready": True, "model": "models:/handbook",
                                         "variants": {"champion": "1", "challenger": "2"}}
    exposition = api.get("/metrics").text
    for variant in {e.name for e in expected.values()}:
        assert f'ragtune_requests_total{{status="200",variant="{variant}"}}' in exposition


def test_a_shadow_answers_unseen_in_scope_and_nobody_can_rate_it(traced, bm25):
    traces, client = traced
    seen: list[dict] = []

    class Recording:
        def ask(self, question, history=None, filters=None, stages=False, on_token=None, on_step=None, tracer=None):
            seen.append(filters)
            return bm25.ask(question, history, filters, tracer=tracer)

    state = ServerState(traces=traces, variants=[Variant("champion", "models:/handbook@champion", "1", 1, bm25)],
                        shadow=Variant("challenger", "models:/handbook@challenger", "2", 1, Recording()))
    app = create_app(state, bearer(KEYS.get), ServeSettings())
    api = TestClient(app, client=LOCAL)
    filters = {"field": "meta.doc_id", "operator": "==", "value": "en/handbook.md"}
    reply = api.post("/query", json={"question": QUESTION, "filters": filters}, headers=ACME).json()
    assert reply["variant"] == "champion"
    app.state.shadow.drain()
    traces.drain()
    assert seen == [scoped_filters(KEYS["k-acme"], filters)]
    request_id = client.get_trace(reply["trace_id"]).info.tags["ragtune.request_id"]
    pair = client.search_traces(locations=[traces.experiment_id], filter_string=f"tag.`ragtune.request_id` = "
                                f"'{request_id}'")
    shadow = [t for t in pair if t.info.tags["ragtune.variant"] == "challenger"]
    assert len(pair) == 2 and len(shadow) == 1 and shadow[0].info.tags["ragtune.shadow"] == "true"
    assert shadow[0].info.tags["ragtune.tenant"] == "acme"
    unknown = api.post("/feedback", json={"trace_id": "tr-" + "0" * 32, "rating": 1}, headers=ACME)
    refused = api.post("/feedback", json={"trace_id": shadow[0].info.trace_id, "rating": 1}, headers=ACME)
    assert (refused.status_code, refused.json()["error"]) == (unknown.status_code, unknown.json()["error"]) == (
        404, unknown.json()["error"])
    assert 'ragtune_shadow_requests_total{status="200"} 1.0' in api.get("/metrics").text


def test_a_busy_shadow_is_shed_and_counted_while_replies_go_out(traced, bm25):
    traces, _ = traced
    release, started = threading.Event(), threading.Event()

    class Stuck:
        def ask(self, *args, **kwargs):
            started.set()
            release.wait(30)
            return {"answer": None, "refused": True, "citations": [], "documents": [], "stages_ms": {}}

    state = ServerState(traces=traces, variants=[Variant("champion", "models:/handbook@champion", "1", 1, bm25)],
                        shadow=Variant("challenger", "models:/handbook@challenger", "2", 1, Stuck()))
    app = create_app(state, bearer(KEYS.get), ServeSettings(shadow_concurrency=1))
    api = TestClient(app, client=LOCAL)
    try:
        first = api.post("/query", json={"question": QUESTION}, headers=ACME)
        assert first.status_code == 200 and started.wait(10)  # the shadow holds its one thread
        replies = [api.post("/query", json={"question": QUESTION}, headers=BETA) for _ in range(4)]
        assert [r.status_code for r in replies] == [200] * 4  # none waits for the stuck shadow
        assert api.get("/healthz").json()["shadow_shed"] == 3  # one more fits its queue
        assert "ragtune_shadow_shed_total 3.0" in api.get("/metrics").text
    finally:
        release.set()
        app.state.shadow.drain()
        traces.drain()
