"""pipeline=agentic as conf/ builds it: the request's filters reach every search and nothing widens them; SQL rows
and passages are cited alike; a run stopped by a safeguard is a refusal. The chat model is scripted here (control
flow); tests/test_run.py runs the same pipeline on SmolLM2."""

from haystack import Document
from haystack.document_stores.in_memory import InMemoryDocumentStore

from pipelines.builder import build_pipeline
from pipelines.spec import GOLDEN_INPUTS
from tests.support.scripted_chat_generator import ScriptedChatGenerator, call
from tests.support.shipped import composed

ACME = {"field": "meta.tenant", "operator": "==", "value": "acme"}


def _built(tmp_path, replies):
    store = InMemoryDocumentStore()
    store.write_documents([
        Document(content="Acme salary bands: grade 5 earns 90k.", meta={"tenant": "acme", "doc_id": "acme/pay.md"}),
        Document(content="Globex salary bands: grade 5 earns 70k.", meta={"tenant": "globex", "doc_id": "globex/pay.md"}),
    ])
    cfg = composed("pipeline=agentic", "pipeline@pipeline.subpipelines.search=bm25_haystack",
                   f"paths.cache={tmp_path}")
    built = build_pipeline(cfg.pipeline, {"store": store, "index_dir": str(tmp_path)}, input_names=GOLDEN_INPUTS)
    built.pipeline.get_component("agent").chat_generator = ScriptedChatGenerator("", first=replies)
    return built


def test_every_search_is_scoped_to_the_requests_filters(tmp_path):
    built = _built(tmp_path, [
        call("kb_search", query="salary bands grade 5"),
        call("kb_search", query="grade 5 salary", filters={"field": "meta.tenant", "operator": "==", "value": "globex"}),
        call("final_answer", answer="Grade 5 earns 90k.", citations=["acme/pay.md", "globex/pay.md"]),
    ])
    outputs = built.run(question="What does grade 5 earn?", filters=ACME)
    (answer,) = outputs["answer"]["answers"]
    assert [d.meta["doc_id"] for d in built.view_documents(outputs)["retrieval"]] == ["acme/pay.md"]
    assert [c["doc_id"] for c in answer.meta["citations"]] == ["acme/pay.md"]
    assert answer.meta["unknown_citations"] == ["globex/pay.md"]  # never returned, so not a citation
    assert "70k" not in str(outputs)


def test_table_rows_are_retrieved_and_cited_like_passages(tmp_path):
    built = _built(tmp_path, [
        call("sql_query", query="SELECT annual_days FROM leave_allowance WHERE office = 'SHA' AND grade = 5"),
        call("final_answer", answer="A grade-5 employee in Shanghai gets 10 annual leave days.",
             citations=["sql:leave_allowance/21"]),
    ])
    outputs = built.run(question="How many annual leave days does grade 5 get in Shanghai?")
    (answer,) = outputs["answer"]["answers"]
    assert [d.meta["doc_id"] for d in built.view_documents(outputs)["context"]] == ["sql:leave_allowance/21"]
    assert answer.data == "A grade-5 employee in Shanghai gets 10 annual leave days. [1]"
    assert answer.meta["refused"] is False and answer.meta["citations"][0]["doc_id"] == "sql:leave_allowance/21"
    assert answer.meta["agent"]["tools"] == ["sql_query", "final_answer"]


def test_a_loop_ends_in_a_refusal_that_says_why(tmp_path):
    built = _built(tmp_path, [call("kb_search", query="pay"), call("kb_search", query="PAY ")])
    (answer,) = built.run(question="What does grade 5 earn?", filters=ACME)["answer"]["answers"]
    assert answer.data == "I cannot answer this from the provided documents. (repeated tool call)"
    assert answer.meta["agent"]["stop_reason"] == "repeated_call" and answer.meta["refused"] is True


def test_a_scoped_request_gets_no_table_rows(tmp_path):
    """The tables carry no tenant or ACL: for a request scoped by filters the SQL tool runs nothing."""
    built = _built(tmp_path, [
        call("sql_query", query="SELECT annual_days FROM leave_allowance WHERE office = 'SHA' AND grade = 5"),
        call("final_answer", answer="10 days.", citations=["sql:leave_allowance/21"]),
    ])
    outputs = built.run(question="How many annual leave days does grade 5 get in Shanghai?", filters=ACME)
    (answer,) = outputs["answer"]["answers"]
    assert built.view_documents(outputs)["context"] == []
    assert answer.meta["citations"] == [] and answer.meta["unknown_citations"] == ["sql:leave_allowance/21"]
    results = [m.tool_call_results[0].result for m in outputs["agent"]["messages"] if m.tool_call_results]
    assert results[0].startswith("refused: sql_query does not run for a request scoped by filters")
