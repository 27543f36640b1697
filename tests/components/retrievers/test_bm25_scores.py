import bm25s
import numpy as np
import pytest

from components.retrievers import bm25_scores
from components.retrievers.bm25_scores import BM25Scores

# "the" is in every document, "of" in half, "zebra" in one: with a share of 2, "the" and "of" get dense rows.
CORPUS = [
    ["the", "cat", "of", "the", "house"],
    ["the", "dog"],
    ["the", "history", "of", "rome", "of", "the", "empire"],
    ["the", "zebra", "runs"],
    ["the", "tax", "of", "cats"],
    ["the", "end"],
]


def _index(method: str) -> bm25s.BM25:
    bm25 = bm25s.BM25(method=method)
    bm25.index(CORPUS, show_progress=False)
    return bm25


@pytest.fixture(autouse=True)
def _small_share(monkeypatch):
    monkeypatch.setattr(bm25_scores, "DENSE_MIN_SHARE", 2)


@pytest.mark.parametrize("method", ["lucene", "robertson", "atire", "bm25l", "bm25+"])
@pytest.mark.parametrize(
    "query", [["the"], ["of", "the"], ["zebra"], ["the", "zebra", "of", "the"], ["cat", "dog", "end", "of"]]
)
def test_scores_are_bit_identical_to_bm25s(method, query):
    bm25 = _index(method)
    ids = bm25.get_tokens_ids(query)
    scores = BM25Scores(bm25)(ids)
    assert scores.dtype == np.float32
    np.testing.assert_array_equal(scores, bm25.get_scores_from_ids(ids))


def test_only_common_terms_get_dense_rows():
    assert BM25Scores(_index("lucene")).dense_terms == 2  # "the" (6 of 6) and "of" (3 of 6)


def test_dense_rows_are_capped(monkeypatch):
    monkeypatch.setattr(bm25_scores, "DENSE_MIN_SHARE", 6)  # every term qualifies
    monkeypatch.setattr(bm25_scores, "DENSE_MAX_TERMS", 3)
    bm25 = _index("lucene")
    scorer = BM25Scores(bm25)
    assert scorer.dense_terms == 3
    ids = bm25.get_tokens_ids(["the", "of", "rome", "zebra", "cats"])
    np.testing.assert_array_equal(scorer(ids), bm25.get_scores_from_ids(ids))


@pytest.mark.parametrize("method", ["lucene", "bm25l"])
def test_no_terms_score_as_in_bm25s(method):
    bm25 = _index(method)
    np.testing.assert_array_equal(BM25Scores(bm25)([]), bm25.get_scores_from_ids([]))


def test_the_rarest_postings_are_those_of_the_rarest_term_with_enough_documents():
    scorer = BM25Scores(_index("lucene"))
    the, of, zebra = (scorer.token_ids([t])[0] for t in ("the", "of", "zebra"))
    assert scorer.rarest_postings([the, of, zebra], 1).tolist() == [3]  # zebra's one document
    assert sorted(scorer.rarest_postings([the, of, zebra], 2).tolist()) == [0, 2, 4]  # of's three
    assert scorer.rarest_postings([zebra], 2) is None
