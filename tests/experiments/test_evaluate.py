"""evaluate() over a real pipeline (BM25 + extractive answer stage) with a scripted judge."""

import pytest
from haystack import Document
from haystack.document_stores.in_memory import InMemoryDocumentStore

from experiments.evaluate import EvalSettings, evaluate
from experiments.golden import EvidenceSpan, GoldenItem
from experiments.judge import Judge
from pipelines.builder import build_pipeline
from tests.pipelines.test_builder import answer_stage

LEAVE = "Full-time employees accrue 20 days of paid annual leave per calendar year."
HOTEL = "The nightly hotel limit is $310 in London."


def store():
    docs = [
        Document(id="leave#0-75", content=LEAVE, meta={"doc_id": "leave", "span": [0, len(LEAVE)]}),
        Document(id="travel#0-42", content=HOTEL, meta={"doc_id": "travel", "span": [0, len(HOTEL)]}),
    ]
    memory = InMemoryDocumentStore()
    memory.write_documents(docs)
    return memory, {"leave": [docs[0]], "travel": [docs[1]]}


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
        "inputs": {"query": ["bm25.query"]},
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
    assert result.per_question[0]["answer/f1"] == pytest.approx(2 * (2 / 13) / (2 / 13 + 1))
    assert m["answer/judge_failures"] == 1.0 and m["answer/faithfulness"] == 0.5  # the failure is not averaged
    assert result.per_question[0]["judge_errors"] == {"answer/faithfulness": "TimeoutError: judge timed out"}
    assert m["cost/llm_calls_per_question"] == 0.0
    assert [row["layer"] for row in result.diagnosis] == ["generation", "generation", "ok"]
    assert m["diagnosis/generation"] == 2 and m["diagnosis/ok"] == 1
    assert m["answer/f1/ci95_low"] <= m["answer/f1"] <= m["answer/f1/ci95_high"]
