"""evaluate() over a real pipeline (BM25 + extractive answer stage) with a scripted judge."""

from dataclasses import replace

import pytest
from haystack import Document
from haystack.document_stores.in_memory import InMemoryDocumentStore

from experiments.datasets.golden.items import EvidenceSpan, GoldenItem
from experiments.evaluation.evaluate import EvalInputError, evaluate
from experiments.evaluation.judge import Judge
from experiments.evaluation.settings import EvalSettings
from pipelines.builder import build_pipeline
from tests.support.handbook import HOTEL, LEAVE, follow_up, store
from tests.support.pipeline_specs import answer_stage


def golden():
    return [
        GoldenItem(id="q1", question="How many days of paid annual leave do full-time employees accrue?",
                   reference_answer="20 days", evidence=(LEAVE,), evidence_spans=((EvidenceSpan("leave", 0, len(LEAVE)),),),
                   category="numeric"),
        GoldenItem(id="q2", question="What is the nightly hotel limit in London?", reference_answer="$310",
                   evidence=(HOTEL,), evidence_spans=((EvidenceSpan("travel", 0, len(HOTEL)),),), category="fact"),
        GoldenItem(id="u1", question="Quantum chromodynamics lattice spacing?", category="unanswerable", answerable=False),
    ]


def pipeline(memory):
    spec = {
        "name": "t",
        "components": {"bm25": {"_target_": "haystack.components.retrievers.in_memory.InMemoryBM25Retriever",
                                "document_store": "@store", "top_k": 2}},
        "inputs": {"question": ["bm25.query"]},
        "retrieval_output": "bm25.documents",
        "context_output": "bm25.documents",
        "answer": answer_stage(),
    }
    return build_pipeline(spec, {"store": memory})


def test_all_layers_cost_diagnosis_and_judge_failures_are_summarised():
    memory, chunks = store()
    calls = {"n": 0}

    async def flaky(user_input, response, retrieved_contexts):
        calls["n"] += 1
        if calls["n"] == 1:
            raise TimeoutError("judge timed out")
        return 0.5

    judge = Judge({"answer/faithfulness": flaky}, "scripted")
    result = evaluate(pipeline(memory), golden(), EvalSettings(ks=[1, 5]), chunks, llm_judge=judge, progress=False)
    m = result.metrics
    assert m["retrieval/recall_at_1"] == 1.0 and m["context/recall"] == 1.0 and m["context/precision"] == 1.0
    assert m["answer/refusal_accuracy"] == 1.0 and m["answer/false_refusal_rate"] == 0.0
    assert m["answer/citation_accuracy"] == 1.0 and m["answer/unsupported_sentence_rate"] == 0.0
    # the extractive answer is the whole 13-token sentence: F1 with "20 days" = 2 * (2/13 * 1) / (2/13 + 1)
    assert result.per_question[0].scores["answer/f1"] == pytest.approx(2 * (2 / 13) / (2 / 13 + 1))
    assert m["answer/judge_failures"] == 1.0 and m["answer/faithfulness"] == 0.5  # the failure is not averaged
    assert result.per_question[0].extras["judge_errors"] == {"answer/faithfulness": "TimeoutError: judge timed out"}
    assert m["cost/llm_calls_per_question"] == 0.0
    assert [row["layer"] for row in result.diagnosis] == ["generation", "generation", "ok"]
    assert m["diagnosis/generation"] == 2 and m["diagnosis/ok"] == 1
    assert m["answer/f1/ci95_low"] <= m["answer/f1"] <= m["answer/f1/ci95_high"]


GOLDEN_INPUTS = ("question", "history", "filters")
TRAVEL = "Flights over six hours may be booked in business class."


def history_pipeline(memory, with_history: bool):
    """A rewriter made of real Haystack parts: the last user turn is prepended to the question."""
    rewrite = {"_target_": "haystack.components.converters.OutputAdapter",
               "template": "{{ history | selectattr('role', 'equalto', 'user') | map(attribute='text') | join(' ') }} {{ question }}",
               "output_type": str, "unsafe": True}
    spec = {
        "name": "h",
        "components": {"rewrite": rewrite,
                       "bm25": {"_target_": "haystack.components.retrievers.in_memory.InMemoryBM25Retriever",
                                "document_store": "@store", "top_k": 1}},
        "connections": [["rewrite.output", "bm25.query"]],
        "inputs": {"question": ["rewrite.question"], "history": ["rewrite.history"]} if with_history
        else {"question": ["bm25.query"]},
        "retrieval_output": "bm25.documents",
    }
    if not with_history:
        spec["components"].pop("rewrite")
        spec["connections"] = []
    return build_pipeline(spec, {"store": memory}, input_names=GOLDEN_INPUTS)


def test_history_reaches_a_pipeline_that_takes_it_and_is_counted_as_unused_otherwise():
    memory, _ = store()
    with_history = evaluate(history_pipeline(memory, True), [follow_up()], EvalSettings(ks=[1]), progress=False)
    assert with_history.metrics["retrieval/recall_at_1"] == 1.0
    assert with_history.metrics["eval/history_unused"] == 0 and with_history.metrics["eval/items_with_history"] == 1
    without = evaluate(history_pipeline(memory, False), [follow_up()], EvalSettings(ks=[1]), progress=False)
    assert without.metrics["eval/history_unused"] == 1


def test_filters_reach_the_retriever_and_are_never_dropped_silently():
    memory, _ = store()
    item = GoldenItem(id="q", question="paid annual leave days limit", relevant_doc_ids=("travel",),
                      filters={"field": "meta.doc_id", "operator": "==", "value": "travel"})
    spec = {"name": "f", "components": {"bm25": {"_target_": "haystack.components.retrievers.in_memory.InMemoryBM25Retriever",
                                                  "document_store": "@store", "top_k": 1}},
            "inputs": {"question": ["bm25.query"], "filters": ["bm25.filters"]}, "retrieval_output": "bm25.documents"}
    filtered = evaluate(build_pipeline(spec, {"store": memory}), [item], EvalSettings(ks=[1]), progress=False)
    assert filtered.metrics["retrieval/recall_at_1"] == 1.0  # the filter kept the better-matching leave chunk out
    unfiltered = evaluate(build_pipeline(spec, {"store": memory}), [replace(item, filters=None)], EvalSettings(ks=[1]),
                          progress=False)
    assert unfiltered.metrics["retrieval/recall_at_1"] == 0.0
    spec["inputs"] = {"question": ["bm25.query"]}
    with pytest.raises(EvalInputError, match=r"1 golden item\(s\) carry filters \(first: 'q'\), but pipeline 'f' has no `filters` input"):
        evaluate(build_pipeline(spec, {"store": memory}), [item], EvalSettings(ks=[1]), progress=False)


def test_chat_generator_calls_inside_a_component_are_counted_with_their_tokens():
    """QueryExpander calls its generator itself; the pipeline never sees that call as a component run."""
    memory, chunks = store()
    expander = {"_target_": "haystack.components.query.QueryExpander", "n_expansions": 1,
                "chat_generator": {"_target_": "tests.support.scripted_chat_generator.ScriptedChatGenerator",
                                   "reply": '{"queries": ["paid annual leave days"]}'}}
    retriever = {"_target_": "haystack.components.retrievers.MultiQueryTextRetriever",
                 "retriever": {"_target_": "haystack.components.retrievers.in_memory.InMemoryBM25Retriever",
                               "document_store": "@store", "top_k": 1}}
    spec = {"name": "mq", "components": {"expander": expander, "retriever": retriever},
            "connections": [["expander.queries", "retriever.queries"]],
            "inputs": {"question": ["expander.query"]}, "retrieval_output": "retriever.documents"}
    built = build_pipeline(spec, {"store": memory}, input_names=GOLDEN_INPUTS)
    assert built.llm_components == frozenset({"expander"})
    result = evaluate(built, golden()[:2], EvalSettings(ks=[1]), chunks, progress=False)
    m = result.metrics
    assert m["cost/llm_calls_per_question"] == 1.0
    assert m["cost/prompt_tokens_per_question"] == 11 and m["cost/completion_tokens_per_question"] == 5
    assert result.per_question[0].scores["retrieval/recall_at_1"] == 1.0
    # the wrapper is gone after evaluation: the generator is its own class's again
    generator = built.pipeline.get_component("expander").chat_generator
    assert "run" not in vars(generator)


def test_span_less_documents_are_placed_in_the_corpus_or_counted_as_unlocated():
    leave_strip = LEAVE[:40]  # a strip cut from the leave chunk, as a compressor would keep it
    memory = InMemoryDocumentStore()
    memory.write_documents([Document(id="strip", content=leave_strip, meta={"doc_id": "leave"}),
                            Document(id="hyde", content="Employees receive generous paid leave of annual days.")])
    spec = {"name": "u", "components": {"bm25": {"_target_": "haystack.components.retrievers.in_memory.InMemoryBM25Retriever",
                                                  "document_store": "@store", "top_k": 2}},
            "inputs": {"question": ["bm25.query"]}, "retrieval_output": "bm25.documents", "context_output": "bm25.documents"}
    corpus = {"leave": LEAVE, "travel": HOTEL}
    result = evaluate(build_pipeline(spec, {"store": memory}), golden()[:1], EvalSettings(ks=[2]), progress=False,
                      corpus=corpus)
    m = result.metrics
    assert m["context/unlocated_documents"] == 1.0 and m["retrieval/unlocated_documents"] == 1.0
    # the strip holds 40 of the quote's 75 characters: more than half, so it is credited, at its own span
    assert m["retrieval/recall_at_2"] == 1.0


def test_the_diagnosis_reads_only_the_chunks_of_documents_holding_evidence(monkeypatch):
    """One filtered lookup by doc_id: a server-side store (store=weaviate) is never read whole."""
    from haystack.document_stores.in_memory import InMemoryDocumentStore

    from experiments.runs.runner import evidence_chunks

    store = InMemoryDocumentStore()
    store.write_documents(
        [Document(id=f"{doc}#{i}", content=f"{doc} {i}", meta={"doc_id": doc}) for doc in "abc" for i in range(2)]
    )
    lookups = []
    read = store.filter_documents
    monkeypatch.setattr(store, "filter_documents", lambda filters=None: lookups.append(filters) or read(filters))
    golden = [GoldenItem(id="q1", question="?", relevant_doc_ids=("a",)), GoldenItem(id="q2", question="?")]
    assert {doc: [c.id for c in chunks] for doc, chunks in evidence_chunks(store, golden).items()} == {
        "a": ["a#0", "a#1"]
    }
    assert lookups == [{"field": "meta.doc_id", "operator": "in", "value": ["a"]}]
    assert evidence_chunks(store, golden[1:]) == {} and len(lookups) == 1


def test_evidence_lookups_are_batched_under_weaviates_result_cap(monkeypatch):
    """Many evidence documents are asked for a batch at a time, each batch one filtered lookup."""
    from haystack.document_stores.in_memory import InMemoryDocumentStore

    from experiments.runs.runner import evidence_chunks

    store = InMemoryDocumentStore()
    store.write_documents([Document(id=f"{doc}#0", content=doc, meta={"doc_id": doc}) for doc in "abcde"])
    lookups = []
    read = store.filter_documents
    monkeypatch.setattr(store, "filter_documents", lambda filters=None: lookups.append(filters["value"]) or read(filters))
    golden = [GoldenItem(id=f"q{doc}", question="?", relevant_doc_ids=(doc,)) for doc in "abcde"]
    assert sorted(evidence_chunks(store, golden, batch=2)) == list("abcde")
    assert lookups == [["a", "b"], ["c", "d"], ["e"]]


def test_a_pipeline_without_a_router_has_no_routing_layer_in_its_diagnosis():
    """A greeting that hybrid_rag retrieves for is not a routing failure: it has nothing that routes."""
    memory, chunks = store()
    greeting = GoldenItem(id="g1", question="Hi there, thanks!", category="chit_chat", route="no_retrieval")
    result = evaluate(pipeline(memory), [*golden(), greeting], EvalSettings(ks=[1]), index_chunks=chunks,
                      progress=False)
    layers = {row["id"]: row["layer"] for row in result.diagnosis}
    assert layers["g1"] == "ok" and "routing" not in layers.values()
