"""An expander (Haystack's QueryExpander) as the rewriter slot, through evaluation: rewrites, fallbacks, cost."""

import pytest

from experiments.evaluation.evaluate import evaluate
from experiments.evaluation.settings import EvalSettings
from pipelines.builder import build_pipeline
from pipelines.spec import GOLDEN_INPUTS
from tests.support.handbook import follow_up, store


def expanding(reply: str) -> dict:
    expander = {"_target_": "haystack.components.query.QueryExpander", "n_expansions": 2,
                "chat_generator": {"_target_": "tests.support.scripted_chat_generator.ScriptedChatGenerator", "reply": reply}}
    return {"name": "expand",
            "components": {"rewriter": expander,
                           "bm25": {"_target_": "haystack.components.retrievers.in_memory.InMemoryBM25Retriever",
                                    "document_store": "@store", "top_k": 1}},
            "inputs": {"question": ["bm25.query"]},
            "queries_from": {"socket": "rewriter.queries", "question": "rewriter.query", "paths": ["bm25"]},
            "retrieval_output": "bm25.documents"}


@pytest.mark.parametrize(("reply", "rewrites", "fallbacks"), [
    ('{"queries": ["limit in London per night", "London hotel limit"]}', 2.0, 0.0),
    ("{oops", 0.0, 1.0),  # malformed: QueryExpander keeps the question alone
    ('{"queries": ["And what is the limit in London?"]}', 0.0, 1.0),  # only the question back: nothing was expanded
])
def test_expansions_count_as_rewrites_and_none_as_a_fallback(reply, rewrites, fallbacks):
    memory, chunks = store()
    built = build_pipeline(expanding(reply), {"store": memory}, input_names=GOLDEN_INPUTS)
    result = evaluate(built, [follow_up()], EvalSettings(ks=[1]), chunks, progress=False)
    assert result.metrics["query/rewrites_per_question"] == rewrites
    assert result.metrics["query/fallbacks"] == fallbacks
    assert result.metrics["cost/llm_calls_per_question"] == 1.0  # counted inside QueryExpander
    assert result.per_question[0].routing["rewritten_queries"][-1] == "And what is the limit in London?"
