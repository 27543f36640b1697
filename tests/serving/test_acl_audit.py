"""The audit's checker on a leaking answerer (it must catch every layer), and the audit on the real pipelines."""

import json

import pytest
from haystack import Document

from experiments.datasets.demo import DEMO_DIR
from serving import acl_audit
from serving.acl_audit import audit, may_see, probes, run_audit
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
    """Ignores the tenant scope: answers every question with every chunk and quotes the first one."""

    def __init__(self, documents, leak: bool):
        self.documents, self.leak = documents, leak

    def ask(self, question, history=None, filters=None, stages=False, on_token=None):
        shown = self.documents if self.leak else [d for d in self.documents if d.id == "public.md"]
        refs = [{"chunk_id": f"{d.id}#0-10", "doc_id": d.id} for d in shown]
        return {"answer": shown[0].content, "refused": False, "citations": refs[:1], "documents": refs,
                "stages": {"retrieval": refs, "context": refs}}


def test_the_demo_probes_cover_three_tenants_with_more_than_200_requests():
    keys = read_api_keys(DEMO_DIR / "api_keys.yaml")
    all_probes = list(probes(keys, tenant_documents(), ["How many days of leave?"]))
    assert len({keys[p.key].tenant for p in all_probes}) == 3 and len(all_probes) >= 200
    assert {p.kind for p in all_probes} == {"verbatim", "golden", "forged_body", "forged_header", "filter_injection",
                                            "history_injection", "prompt_injection"}


def test_a_leaking_answerer_is_caught_at_every_layer():
    documents = tenant_documents()
    report = audit(LeakingAnswerer(documents, leak=True), documents, ["q?"])
    assert report.failed and all(report.leaks[layer] > 0 for layer in acl_audit.LAYERS)
    clean = audit(LeakingAnswerer(documents, leak=False), documents, ["q?"])
    assert not clean.failed and clean.checked["context"] > 200 and clean.leaks.total() == 0
    assert "0 cross-tenant chunks or passages, 0 unexpected statuses" in clean.lines()[-1]


def test_a_chunk_that_names_no_source_document_counts_as_a_leak():
    documents = tenant_documents()

    class Unattributed(LeakingAnswerer):
        def ask(self, *args, **kwargs):
            return super().ask(*args, **kwargs) | {"documents": [{"chunk_id": "stray", "doc_id": None}]}

    assert audit(Unattributed(documents, leak=False), documents, ["q?"]).leaks["context"] > 0


@pytest.mark.slow
@pytest.mark.parametrize("pipeline", ["hybrid", "crag"])
def test_no_principal_sees_another_tenants_chunks(pipeline):
    report = run_audit([f"pipeline={pipeline}"])
    print("\n".join(report.lines()))
    assert sum(report.requests.values()) >= 200 and report.checked["context"] >= 300
    assert not report.failed, report.lines()
