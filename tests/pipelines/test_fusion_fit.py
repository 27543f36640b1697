"""Per-corpus fusion weights from pseudo-queries: the choice on scripted candidate lists, and the whole fit on the
demo's real index (BM25 and MiniLM), cached with the index and applied to the pipeline's fusion."""

import json

import pytest
from haystack import Document

from components.joiners.rank_fusion_joiner import RankFusionJoiner
from experiments.runs.config import validate
from experiments.runs.indexed import load_indexed_pipeline
from pipelines.fusion_fit import FIT_QUERIES, WEIGHTS, choose_weight, pseudo_queries
from tests.support.shipped import composed

LONG = "The nightly hotel limit for staff travelling to London is three hundred and ten pounds per person."


def test_pseudo_queries_take_each_sampled_chunks_longest_sentence_the_same_on_every_build():
    chunks = [Document(id=f"c{i}", content=f"Short one. {LONG} Tail {i}.") for i in range(5)]
    chunks.append(Document(id="tiny", content="Too short to ask."))
    queries = pseudo_queries(chunks, "sentence")
    assert sorted(chunk for _, chunk in queries) == [f"c{i}" for i in range(5)]  # `tiny` says too little
    assert {query for query, _ in queries} == {LONG}
    assert pseudo_queries(list(reversed(chunks)), "sentence") == queries
    assert {query for query, _ in pseudo_queries(chunks, "half")} == {" ".join(LONG.split()[:8])}
    sentence = "员工出差住宿标准为一线城市每晚不超过六百元人民币，二线城市每晚不超过四百元人民币。"
    assert pseudo_queries([Document(id="zh", content=sentence)], "half") == [(sentence[: len(sentence) // 2], "zh")]


def lists_where(best: str, count: int = 8) -> tuple[list[dict], list[tuple[str, str]]]:
    """Pseudo-queries whose own chunk is first on the `best` path and absent from the other, whose first hit is
    another chunk: under RRF it comes first only when `best` weighs more than the other."""
    lists, queries = [], []
    for q in range(count):
        answer, rival = Document(id=f"z{q}"), Document(id=f"a{q}")  # on a tie the rival sorts first
        other = "bm25" if best == "dense" else "dense"
        lists.append({best: [answer], other: [rival]})
        queries.append((f"q{q}", f"z{q}"))
    return lists, queries


@pytest.mark.parametrize(("best", "weight"), [("dense", 1.5), ("bm25", min(WEIGHTS))])
def test_the_weight_that_ranks_the_pseudo_queries_own_chunks_highest_is_kept(best, weight):
    joiner = RankFusionJoiner(paths=["bm25", "dense"], mode="rrf", weights={"bm25": 1.0, "dense": 1.0})
    lists, queries = lists_where(best)
    fit = choose_weight(joiner, lists, queries, "sentence")
    assert fit.dense_weight == weight and fit.path_mrr == {best: 1.0, "bm25" if best == "dense" else "dense": 0.0}
    assert fit.weight_mrr[f"{weight:g}"] == 1.0 and fit.weight_mrr[f"{max(WEIGHTS) if best == 'bm25' else 0.25:g}"] == 0.5
    assert joiner.weights == {"bm25": 1.0, "dense": 1.0}  # trying the grid leaves the joiner as it was


def test_a_tie_keeps_the_configured_weight():
    joiner = RankFusionJoiner(paths=["bm25", "dense"], mode="rrf", weights={"bm25": 1.0, "dense": 2.0})
    assert choose_weight(joiner, *lists_where("dense"), "sentence").dense_weight == 2.0


def test_the_fit_on_a_real_index_is_cached_with_it_logged_and_applied(tmp_path):
    cfg = composed("pipeline=hybrid", "models=minilm", "retriever.fusion.fit=auto", f"paths.cache={tmp_path}",
                   "dataset.subset=en")
    indexed = load_indexed_pipeline(validate(cfg))
    fit = indexed.fit
    assert fit is not None and fit.queries == FIT_QUERIES and fit.dense_weight in WEIGHTS
    assert indexed.query.pipeline.get_component("fusion").weights["dense"] == fit.dense_weight
    [cached] = indexed.index_dir.glob("fusion_fit-*.json")
    assert json.loads(cached.read_text())["dense_weight"] == fit.dense_weight
    assert fit.params()["fusion/fit/dense_weight"] == fit.dense_weight
    again = load_indexed_pipeline(validate(cfg))  # read back, not refitted
    assert again.fit == fit and list(indexed.index_dir.glob("fusion_fit-*.json")) == [cached]
