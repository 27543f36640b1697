"""The audit's checker on a leaking answerer (it must catch every layer), on deliberately leaky variants of
serve.py's online routes (/feedback, /metrics, the online report), and the audit on the real pipelines."""

import json
import shutil
from pathlib import Path

import mlflow
import pytest
from haystack import Document, tracing
from mlflow.environment_variables import MLFLOW_ENABLE_ASYNC_TRACE_LOGGING

import serving.http.routes
from components.retrievers.document_masks import DocumentMasks
from experiments.datasets.demo import DEMO_DIR
from pipelines.errors import UserError
from serving.audit.channels import ELSEWHERE, PyfuncChannel, ServeChannel
from serving.audit.checks import (
    LAYERS,
    ONLINE_LAYERS,
    AuditReport,
    Confidential,
    check_reply,
    may_see,
    texts_of,
)
from serving.audit.online import audit_online
from serving.audit.probes import Probe, probes
from serving.audit.run import PATHS, audit, audit_keys, run_audit
from serving.http import answering
from serving.online import report as online_report
from serving.online.feedback import Ratings
from serving.online.metrics import ServerMetrics
from serving.online.traces import Owners
from serving.principals import Principal, read_api_keys


@pytest.mark.parametrize(("meta", "principal", "visible"), [
    ({}, Principal("acme"), True),
    ({"tenant": "acme"}, Principal("acme"), True),
    ({"tenant": "acme"}, Principal("globex", ("managers",)), False),
    ({"tenant": "acme", "acl": ["managers"]}, Principal("acme"), False),
    ({"tenant": "acme", "acl": ["managers"]}, Principal("acme", ("managers",)), True),
    ({"acl": ["managers"]}, Principal("acme", ("managers",)), False),
])
def test_the_audits_own_rule(meta, principal, visible):
    assert may_see(principal, meta) is visible


def tenant_documents() -> list[Document]:
    rows = [json.loads(line) for line in (DEMO_DIR / "tenants.jsonl").read_text().splitlines()]
    documents = [Document(id=row.pop("doc_id"), content=f"Policy text number {i} of this handbook. Its second sentence is long too.",
                          meta=row) for i, row in enumerate(rows)]
    return documents + [Document(id="public.md", content="A public page everyone may read, also long enough.")]


class LeakingAnswerer:
    """Ignores the tenant scope: answers every question with every chunk and quotes the first one, after a search
    step (as an agent streams it) that returns it."""

    takes_filters = True

    def __init__(self, documents, leak: bool):
        self.documents, self.leak = documents, leak

    def ask(self, question, history=None, filters=None, stages=False, on_token=None, on_step=None,
            tracer=None):
        shown = self.documents if self.leak else [d for d in self.documents if d.id == "public.md"]
        if on_step is not None:
            on_step({"tool": "kb_search", "arguments": {"query": question}, "error": False,
                     "observation": " ".join(d.content for d in shown)})
        refs = [{"chunk_id": f"{d.id}#0-10", "doc_id": d.id} for d in shown]
        return {"answer": shown[0].content, "refused": False, "citations": refs[:1], "documents": refs,
                "stages": {"retrieval": refs, "context": refs}, "stages_ms": {}}


KEYS = read_api_keys(DEMO_DIR / "api_keys.yaml")


@pytest.fixture(scope="module")
def empty_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real MLflow sqlite store with its tables made, and nothing in it: made once, as it takes seconds."""
    store = tmp_path_factory.mktemp("store") / "mlflow.db"
    mlflow.MlflowClient(f"sqlite:///{store}").search_experiments()
    return store


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, empty_store: Path) -> Path:
    """Where serve.py's channel keeps its MLflow store (a copy of the empty one) and the keys file; the
    process-wide settings its traces change are put back afterwards."""
    shutil.copy(empty_store, tmp_path / "mlflow.db")
    content_tracing = tracing.tracer.is_content_tracing_enabled
    monkeypatch.setattr(tracing.tracer, "is_content_tracing_enabled", content_tracing)
    monkeypatch.setenv(MLFLOW_ENABLE_ASYNC_TRACE_LOGGING.name, "false")
    return tmp_path


def with_admin(folder: Path) -> dict[str, Principal]:
    """The demo's keys and the audit's admin key, read back from the keys file the audit writes."""
    return read_api_keys(audit_keys(folder))


def channels(answerer) -> list:
    return [ServeChannel(answerer, KEYS), PyfuncChannel(answerer, KEYS)]


def test_the_demo_probes_cover_three_tenants_every_attack_and_requests_without_credentials():
    all_probes = list(probes(KEYS, tenant_documents(), ["How many days of leave?"]))
    assert len({KEYS[p.key].tenant for p in all_probes if p.key in KEYS}) == 3 and len(all_probes) >= 300
    assert {p.kind for p in all_probes} == {
        "verbatim", "golden", "forged_body", "forged_header", "duplicate_header", "filter_injection", "filter_schema",
        "filter_range", "invalid_unicode", "oversized", "history_injection", "prompt_injection", "unauthenticated"}


def test_a_slow_pipeline_can_quote_a_few_hidden_documents_of_each_key_spread_over_them():
    documents = tenant_documents()
    quoted = [p for p in probes(KEYS, documents, [], hidden_documents=2) if p.kind == "verbatim"]
    everything = [p for p in probes(KEYS, documents, []) if p.kind == "verbatim"]
    assert len(quoted) == 2 * 2 * len(KEYS) < len(everything)  # two sentences of two documents a key
    assert len({p.body["question"] for p in quoted}) > 2 * 2  # not the same two documents for every key


def test_a_leaking_answerer_is_caught_at_every_layer_on_every_path():
    documents = tenant_documents()
    report = audit(channels(LeakingAnswerer(documents, leak=True)), KEYS, documents, ["q?"])
    assert report.failed and all(report.leaks[layer] > 0 for layer in LAYERS)
    assert {kind.split("/")[0] for kind in report.requests} == {"serve", "pyfunc"}
    clean = audit(channels(LeakingAnswerer(documents, leak=False)), KEYS, documents, ["q?"])
    assert not clean.failed and clean.checked["context"] > 400 and clean.leaks.total() == 0, clean.lines()
    assert clean.checked["steps"] > 200  # serve.py streams an agent's steps
    assert "0 cross-tenant chunks, passages or side channels, 0 unexpected statuses" in clean.lines()[-1]


def test_a_chunk_that_names_no_source_document_counts_as_a_leak():
    documents = tenant_documents()

    class Unattributed(LeakingAnswerer):
        def ask(self, *args, **kwargs):
            return super().ask(*args, **kwargs) | {"documents": [{"chunk_id": "stray", "doc_id": None}]}

    assert audit(channels(Unattributed(documents, leak=False)), KEYS, documents, ["q?"]).leaks["context"] > 0


def test_a_refusal_that_names_a_hidden_document_is_a_leak():
    documents = tenant_documents()

    class Telling(LeakingAnswerer):
        def ask(self, *args, **kwargs):
            raise UserError(f"cannot filter {documents[0].id}")  # a 400 whose message depends on a document

    report = audit([ServeChannel(Telling(documents, leak=False), KEYS)], KEYS, documents, ["q?"])
    assert report.leaks["replies"] > 0


QUESTION = "How many days of paid annual leave do full-time employees accrue?"


def test_the_audit_checks_serve_pys_online_routes_after_its_probes_and_summarises_them(folder):
    """The whole flow on an honest server, for two tenants' three keys (one tenant with two sets of groups)
    and the admin: every key's probes are traced, then rate, scrape and report."""
    documents, every = tenant_documents(), with_admin(folder)
    asking = ("demo-acme-staff", "demo-acme-manager", "demo-globex-staff")
    keys = {k: p for k, p in every.items() if p.admin or k in asking}
    channel = ServeChannel(LeakingAnswerer(documents, leak=False), keys, folder)
    report = audit([channel], keys, documents, [QUESTION], hidden_documents=1)
    assert not report.failed, report.lines()
    owners, raters = 3, 3 + 2  # each key asked; the two other keys, the admin, an invalid key and no key rate
    assert report.requests["serve/feedback"] == owners * (2 * 2 * raters + 1)
    assert report.checked["feedback"] == owners * (2 * raters + 1)
    assert report.requests["serve/metrics"] == (owners + 2) * 2 * 2 + 1
    assert report.requests["serve/report"] == 1
    assert report.checked["report"] == 3 + 2  # three outputs, and the figures of the two tenants that asked
    lines = report.lines()
    for layer in ONLINE_LAYERS:
        assert [layer, str(report.checked[layer]), "0"] in [line.split() for line in lines], lines
    assert (folder / "online-report" / "report.md").is_file()


def online_audit(folder: Path) -> AuditReport:
    """Each demo key asks serve.py once, then the online routes are audited: quick (each trace costs the
    store)."""
    documents, keys = tenant_documents(), with_admin(folder)
    channel = ServeChannel(LeakingAnswerer(documents, leak=False), keys, folder)
    owned, said = {}, [QUESTION]
    for key in KEYS:
        status, reply = channel.send(Probe("golden", key, {"question": QUESTION}))
        assert status == 200, reply
        owned[key] = reply["trace_id"]
        said.append(reply["answer"])
    report = AuditReport()
    audit_online(channel, keys, owned, Confidential.of(documents, said), report)
    return report


def test_every_online_probe_passes_on_an_honest_server(folder):
    report = online_audit(folder)
    assert not report.failed, report.lines()
    assert report.checked["feedback"] == len(KEYS) * (2 * (len(KEYS) + 2) + 1)
    assert report.checked["metrics"] == (len(KEYS) + 2) * 2 + 1 and report.checked["report"] == 3 + 3


REAL_READ, REAL_EXPOSITION = online_report.read, ServerMetrics.exposition


def foreign_rating_is_busy(self, body, principal):
    """/feedback telling another principal's trace id from an unknown one: 503 for the first, 404 for the
    second."""
    if self.traces.owners.owns(body.trace_id, principal):
        return self.traces.submit(lambda: self._write(body, principal))
    return False if body.trace_id in self.traces.owners._owners else None


def trace_reveals_its_question(trace):
    """A report grouping by the trace's request preview (its question, under serve.trace.content=full)."""
    served = REAL_READ(trace)
    served.tenant = trace.info.request_preview or served.tenant
    return served


def metrics_name_a_tenant(metrics):
    """An exposition with a tenant in a label."""
    return REAL_EXPOSITION(metrics) + b'ragtune_requests_of{tenant="acme"} 1\n'



@pytest.mark.parametrize(("target", "name", "leaky", "layer", "says"), [
    (Ratings, "accept", foreign_rating_is_busy, "feedback", "differs from the unknown"),
    (Owners, "owns", lambda self, trace_id, principal: True, "feedback", "a rating another principal sent"),
    (serving.http.routes, "LOOPBACK", {ELSEWHERE[0]}, "metrics", "GET /metrics as demo-acme-staff: 200"),
    (ServerMetrics, "exposition", metrics_name_a_tenant, "metrics", "shows 'acme'"),
    (online_report, "read", trace_reveals_its_question, "report", "serve online-report"),
], ids=["feedback-503-on-a-foreign-trace", "feedback-anyone-rates", "metrics-off-loopback",
        "metrics-tenant-label", "report-groups-by-question"])
def test_a_leaky_online_route_is_caught(folder, monkeypatch, target, name, leaky, layer, says):
    """Each a server deliberately broken in one place: the audit reports it as a leak of that route."""
    monkeypatch.setattr(target, name, leaky)
    report = online_audit(folder)
    assert report.failed and report.leaks[layer] > 0, report.lines()
    assert any(says in example for example in report.examples), report.examples


@pytest.mark.slow
def test_no_principal_sees_another_tenants_chunks_through_the_agent():
    """SmolLM2 held to search first, then to answer: every tool result it streams, every document and every answer
    is checked; two hidden documents quoted a key keep it to about ten minutes on two cores."""
    overrides = ["pipeline=agentic", "pipeline.components.agent.first_tool=kb_search",
                 "pipeline.components.agent.max_agent_steps=2"]
    report = run_audit(overrides, ("serve",), questions_per_principal=2, hidden_documents=2)
    print("\n".join(report.lines()))
    assert report.checked["steps"] >= 100 and report.checked["context"] >= 100
    assert not report.failed, report.lines()


@pytest.mark.slow
@pytest.mark.parametrize(("pipeline", "paths"), [("hybrid", PATHS), ("crag", ("serve", "pyfunc"))])
def test_no_principal_sees_another_tenants_chunks_on_any_serving_path(pipeline, paths):
    report = run_audit([f"pipeline={pipeline}"], paths)
    print("\n".join(report.lines()))
    assert {kind.split("/")[0] for kind in report.requests} == set(paths)
    assert sum(report.requests.values()) >= 300 * len(paths) and report.checked["context"] >= 300
    assert all(report.checked[layer] > 0 for layer in ONLINE_LAYERS)  # serve.py is in both
    assert not report.failed, report.lines()


def test_a_step_that_shows_a_hidden_passage_on_one_line_is_a_leak():
    """An agent's observation collapses a passage's line breaks: the quote is still found."""
    hidden = Document(id="acme/leave.md", content="Leave rules of Acme.\nEvery engineer gets 27 days\nof paid leave.",
                      meta={"tenant": "acme"})
    principal = Principal("globex")
    texts = texts_of(principal, [hidden])
    observation = "[acme/leave.md] " + " ".join(hidden.content.split())
    report = AuditReport()
    reply = {"answer": "", "citations": [], "documents": [],
             "steps": [{"tool": "kb_search", "arguments": {}, "error": False, "observation": observation}]}
    check_reply(principal, reply, {}, texts, report, "#0")
    assert report.leaks["steps"] == 1 and report.checked["steps"] == 1


class ScopedAnswerer(LeakingAnswerer):
    """Answers from the documents its filters let through, as a pipeline's retrievers do, quoting the first."""

    def ask(self, question, history=None, filters=None, stages=False, on_token=None, on_step=None, tracer=None):
        kept = DocumentMasks(self.documents).mask(filters).tolist()
        refs = [{"chunk_id": f"{d.id}#0-10", "doc_id": d.id} for d, keep in zip(self.documents, kept, strict=True) if keep]
        shown = next((d.content for d, keep in zip(self.documents, kept, strict=True) if keep), None)
        return {"answer": shown, "refused": shown is None, "citations": refs[:1], "documents": refs,
                "stages": {"retrieval": refs, "context": refs}, "stages_ms": {}}


def test_the_cache_probe_passes_an_honest_cache_and_checks_traces_it_cannot_share(folder):
    documents, keys = tenant_documents(), with_admin(folder)
    channel = ServeChannel(ScopedAnswerer(documents, leak=False), keys, folder, cache=True)
    report = audit([channel], keys, documents, [QUESTION], hidden_documents=1, fresh=["Who approves travel?"])
    assert not report.failed, report.lines()
    principals = 2 * len(KEYS)  # each key and its twin
    assert report.requests["serve/cache"] == principals * (1 + 3)  # the fresh question and a sentence per tenant
    hits = channel.api.app.state.context.cache.counts()["hits"]
    assert hits >= len(KEYS) * 4 and ["cache", str(report.checked["cache"]), "0"] in [line.split() for line in report.lines()]
    assert report.checked["cache"] == 2 * principals * 4 + len(KEYS) * 4  # entry and trace id each; a twin's rating


def test_a_cache_keyed_without_the_scope_is_caught(monkeypatch):
    real = answering.cache_key
    monkeypatch.setattr(answering, "cache_key", lambda variant, question, history, filters, stages: real(
        variant, question, history, {}, stages))
    documents = tenant_documents()
    report = audit([ServeChannel(ScopedAnswerer(documents, leak=False), KEYS, cache=True)], KEYS, documents,
                   [QUESTION], hidden_documents=1, fresh=["Who approves travel?"])
    assert report.failed and report.leaks["cache"] > 0 and report.leaks["context"] > 0, report.lines()
    assert any("though no principal of its scope asked before" in example for example in report.examples)
