import math
import random

import pytest
import pytrec_eval
from haystack import Document

from experiments.datasets.golden.items import GoldenItem
from experiments.evaluation.metrics import aggregate, by_category, rank_metrics
from experiments.evaluation.relevance import Judged, judge

KS = (1, 3, 5, 10, 20, 50)


def judged(gains: tuple[int, ...], n_units: int) -> Judged:
    return Judged(gains=gains, n_units=n_units, mode="quote", ids=tuple(f"c{i}" for i in range(len(gains))))


def test_hand_computed_values():
    m = rank_metrics(judged((0, 1, 0, 2, 0), 4), [1, 2, 5, 10])
    assert list(m)[:4] == ["hit_at_1", "hit_at_2", "hit_at_5", "hit_at_10"]
    assert len(m) == 6 * 4
    assert (m["hit_at_1"], m["hit_at_2"], m["hit_at_10"]) == (0.0, 1.0, 1.0)
    assert (m["recall_at_1"], m["recall_at_2"], m["recall_at_5"]) == (0.0, 0.25, 0.75)
    assert (m["precision_at_2"], m["precision_at_5"], m["precision_at_10"]) == (0.5, 0.4, 0.2)
    assert (m["mrr_at_1"], m["mrr_at_2"], m["mrr_at_10"]) == (0.0, 0.5, 0.5)
    assert m["map_at_2"] == pytest.approx((1 * 1 / 2) / 4)
    assert m["map_at_5"] == pytest.approx((1 * 1 / 2 + 2 * 2 / 4) / 4)
    dcg = 1 / math.log2(3) + 2 / math.log2(5)
    assert m["ndcg_at_5"] == pytest.approx(dcg / sum(1 / math.log2(j + 1) for j in range(1, 5)))
    assert m["ndcg_at_2"] == pytest.approx((1 / math.log2(3)) / (1 + 1 / math.log2(3)))


def test_ndcg_is_capped_when_one_rank_credits_several_units():
    m = rank_metrics(judged((3,), 3), [1, 3])
    assert m["ndcg_at_1"] == 1.0  # DCG 3 > IDCG@1 = 1
    assert m["ndcg_at_3"] == 1.0  # DCG 3 > IDCG@3 = 1 + 1/log2(3) + 1/2
    assert m["recall_at_1"] == 1.0 and m["precision_at_3"] == pytest.approx(1 / 3)
    later = rank_metrics(judged((0, 2), 3), [2])
    assert later["ndcg_at_2"] == pytest.approx((2 / math.log2(3)) / (1 + 1 / math.log2(3)))


def test_short_and_empty_rankings():
    m = rank_metrics(judged((1,), 1), [1, 50])
    assert m["precision_at_50"] == 1 / 50 and m["ndcg_at_50"] == 1.0 and m["map_at_50"] == 1.0
    assert set(rank_metrics(judged((), 2), [5]).values()) == {0.0}


def test_invalid_inputs():
    with pytest.raises(ValueError, match="n_units=0"):
        rank_metrics(judged((1,), 0), [1])
    with pytest.raises(ValueError, match="ks must be positive"):
        rank_metrics(judged((1,), 1), [0, 5])


def test_all_values_within_unit_interval_on_random_inputs():
    rng = random.Random(1234)
    for _ in range(3000):
        n_units = rng.randint(1, 12)
        remaining = n_units
        gains = []
        for _ in range(rng.randint(0, 60)):
            gain = rng.choice([0, 0, 0, 1, 2, 3]) if remaining else 0
            gain = min(gain, remaining)
            remaining -= gain
            gains.append(gain)
        ks = rng.sample(range(1, 70), rng.randint(1, 6))
        for name, value in rank_metrics(judged(tuple(gains), n_units), ks).items():
            assert 0.0 <= value <= 1.0, (name, value, gains, n_units)


# --- agreement with trec_eval (pytrec_eval) and ranx in doc mode ---------------------------------------------


def random_doc_mode_queries(seed: int, count: int) -> list[tuple[str, GoldenItem, Judged]]:
    """Judged rankings built through judge(): chunks of 80 documents, collapsed to documents."""
    rng = random.Random(seed)
    queries = []
    for q in range(count):
        relevant = tuple(rng.sample([f"d{i:02d}" for i in range(80)], rng.randint(1, 25)))
        pool = [*relevant[: rng.randint(0, len(relevant))], *(f"d{i:02d}" for i in range(80))]
        chunks = []
        for _ in range(rng.choice([0, 1, 3, 10, 40, 70, 120])):
            doc_id = rng.choice(pool)
            start = rng.randrange(1000)
            chunks.append(
                Document(
                    id=f"{doc_id}#{start}", content="x", meta={"doc_id": doc_id, "span": [start, start + 9]}
                )
            )
        item = GoldenItem(id=f"q{q}", question="?", relevant_doc_ids=relevant)
        queries.append((f"q{q}", item, judge(chunks, item)))
    return queries


@pytest.fixture(scope="module")
def doc_mode_queries() -> list[tuple[str, GoldenItem, Judged]]:
    queries = random_doc_mode_queries(seed=99, count=300)
    assert any(not j.ids for _, _, j in queries) and any(sum(j.gains) == 0 and j.ids for _, _, j in queries)
    assert any(j.gains and j.gains[0] for _, _, j in queries)
    return queries


def qrels_and_run(queries: list[tuple[str, GoldenItem, Judged]], cut: int | None = None) -> tuple[dict, dict]:
    """Strictly decreasing scores so that trec_eval's (score, docid) tie-breaking never applies."""
    qrels = {qid: {doc_id: 1 for doc_id in item.relevant_doc_ids} for qid, item, _ in queries}
    run = {
        qid: {doc_id: float(1000 - rank) for rank, doc_id in enumerate(j.ids[:cut])} for qid, _, j in queries
    }
    return qrels, run


def test_doc_mode_matches_trec_eval(doc_mode_queries):
    qrels, run = qrels_and_run(doc_mode_queries)
    cuts = ",".join(map(str, KS))
    measures = {f"P.{cuts}", f"recall.{cuts}", f"map_cut.{cuts}", f"ndcg_cut.{cuts}", f"success.{cuts}"}
    trec = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
    # recip_rank has no cut in trec_eval: evaluate runs truncated at k instead
    recip = {
        k: pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(
            qrels_and_run(doc_mode_queries, k)[1]
        )
        for k in KS
    }
    names = {"hit": "success", "recall": "recall", "precision": "P", "map": "map_cut", "ndcg": "ndcg_cut"}
    for qid, _, j in doc_mode_queries:
        ours = rank_metrics(j, KS)
        for k in KS:
            for metric, trec_name in names.items():
                assert ours[f"{metric}_at_{k}"] == pytest.approx(trec[qid][f"{trec_name}_{k}"], abs=1e-9), (
                    qid,
                    metric,
                    k,
                )
            assert ours[f"mrr_at_{k}"] == pytest.approx(recip[k][qid]["recip_rank"], abs=1e-9), (qid, k)


def test_doc_mode_matches_ranx(doc_mode_queries):
    ranx = pytest.importorskip("ranx")
    qrels, run = qrels_and_run(doc_mode_queries)
    ranx_run = ranx.Run(run)
    names = {
        "hit": "hit_rate",
        "recall": "recall",
        "precision": "precision",
        "mrr": "mrr",
        "map": "map",
        "ndcg": "ndcg",
    }
    ranx.evaluate(ranx.Qrels(qrels), ranx_run, [f"{n}@{k}" for n in names.values() for k in KS])
    for qid, _, j in doc_mode_queries:
        ours = rank_metrics(j, KS)
        for k in KS:
            for metric, ranx_name in names.items():
                theirs = float(ranx_run.scores[f"{ranx_name}@{k}"][qid])
                assert ours[f"{metric}_at_{k}"] == pytest.approx(theirs, abs=1e-9), (qid, metric, k)


# --- aggregation -----------------------------------------------------------------------------------------------


def test_aggregate_means_over_items_that_have_the_key():
    assert aggregate([{"a": 1.0, "b": 0.0}, {"a": 0.0}, {"a": 0.5, "b": 1.0}]) == {"a": 0.5, "b": 0.5}
    assert aggregate([]) == {}


def test_by_category_names_and_means():
    items = [
        GoldenItem(id="1", question="?", category="numeric"),
        GoldenItem(id="2", question="?", category="numeric"),
        GoldenItem(id="3", question="?"),
        GoldenItem(id="4", question="?", category="how/to: 中文"),
    ]
    per_item = [{"recall_at_5": 1.0}, {"recall_at_5": 0.0}, {"recall_at_5": 0.25}, {"recall_at_5": 1.0}]
    assert by_category(items, per_item, "retrieval") == {
        "retrieval/recall_at_5/cat/numeric": 0.5,
        "retrieval/recall_at_5/cat/none": 0.25,
        "retrieval/recall_at_5/cat/how_to_ 中文": 1.0,
    }
    assert "stage/bm25/recall_at_5/cat/none" in by_category(items, per_item, "stage/bm25/")


def test_by_category_rejects_mismatches_and_name_collisions():
    items = [
        GoldenItem(id="1", question="?", category="a/b"),
        GoldenItem(id="2", question="?", category="a:b"),
    ]
    with pytest.raises(ValueError, match="both map to metric name part 'a_b'"):
        by_category(items, [{"x": 1.0}, {"x": 0.0}], "retrieval")
    with pytest.raises(ValueError, match="2 items but 1 metric dicts"):
        by_category(items, [{"x": 1.0}], "retrieval")
