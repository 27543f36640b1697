"""The audit's checker on a leaking answerer (it must catch every layer), and the audit on the real pipelines."""

import json

import pytest
from haystack import Document

from experiments.datasets.demo import DEMO_DIR
from pipelines.errors import UserError
from serving import acl_audit
from serving.acl_audit import PATHS, PyfuncChannel, ServeChannel, audit, may_see, probes, run_audit
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

    def ask(self, question, history=None, filters=None, stages=False, on_token=None, on_step=None):
        shown = self.documents if self.leak else [d for d in self.documents if d.id == "public.md"]
        if on_step is not None:
            on_step({"tool": "kb_search", "arguments": {"query": question}, "error": False,
                     "observation": " ".join(d.content for d in shown)})
        refs = [{"chunk_id": f"{d.id}#0-10", "doc_id": d.id} for d in shown]
        return {"answer": shown[0].content, "refused": False, "citations": refs[:1], "documents": refs,
                "stages": {"retrieval": refs, "context": refs}, "stages_ms": {}}


KEYS = read_api_keys(DEMO_DIR / "api_keys.yaml")


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
    assert report.failed and all(report.leaks[layer] > 0 for layer in acl_audit.LAYERS)
    assert {kind.split("/")[0] for kind in report.requests} == {"serve", "pyfunc"}
    clean = audit(channels(LeakingAnswerer(documents, leak=False)), KEYS, documents, ["q?"])
    assert not clean.failed and clean.checked["context"] > 400 and clean.leaks.total() == 0, clean.lines()
    assert clean.checked["steps"] > 200  # serve.py streams an agent's steps
    assert "0 cross-tenant chunks or passages, 0 unexpected statuses" in clean.lines()[-1]


def test_a_chunk_that_names_no_source_document_counts_as_a_leak():
    documents = tenant_documents()

    class Unattributed(LeakingAnswerer):
        def ask(self, *args, **kwargs):
            return super().ask(*args, **kwargs) | {"documents": [{"chunk_id": "stray", "doc_id": None}]}

    assert audit(channels(Unattributed(documents, leak=False)), KEYS, documents, ["q?"]).leaks["context"] > 0


def test_a_refusal_that_names_a_hidden_document_is_a_leak():
    documents = tenant_documents()

    class Telling(LeakingAnswerer):
        def ask(self, question, history=None, filters=None, stages=False, on_token=None, on_step=None):
            raise UserError(f"cannot filter {documents[0].id}")  # a 400 whose message depends on a document

    report = audit([ServeChannel(Telling(documents, leak=False), KEYS)], KEYS, documents, ["q?"])
    assert report.leaks["replies"] > 0


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
    assert not report.failed, report.lines()


def test_a_step_that_shows_a_hidden_passage_on_one_line_is_a_leak():
    """An agent's observation collapses a passage's line breaks: the quote is still found."""
    hidden = Document(id="acme/leave.md", content="Leave rules of Acme.\nEvery engineer gets 27 days\nof paid leave.",
                      meta={"tenant": "acme"})
    principal = Principal("globex")
    texts = acl_audit._texts(principal, [hidden])
    observation = "[acme/leave.md] " + " ".join(hidden.content.split())
    report = acl_audit.AuditReport()
    reply = {"answer": "", "citations": [], "documents": [],
             "steps": [{"tool": "kb_search", "arguments": {}, "error": False, "observation": observation}]}
    acl_audit.check_reply(principal, reply, {}, texts, report, "#0")
    assert report.leaks["steps"] == 1 and report.checked["steps"] == 1
