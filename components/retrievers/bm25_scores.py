"""BM25 query scores from a bm25s index, with its commonest terms' columns also held as dense rows."""

import bm25s
import numpy as np

# A term found in at least 1 of every DENSE_MIN_SHARE documents gets a dense row, the commonest DENSE_MAX_TERMS
# of them: 32 rows of float32 are 128 MB at 1M documents. Adding one contiguous row costs a fraction of
# scattering the same term's postings (at 1M HaluEval chunks, score p95 12.6 -> 2.8 ms over 200 queries).
DENSE_MIN_SHARE = 8
DENSE_MAX_TERMS = 32


class BM25Scores:
    """
    Scores every document for a query, bit for bit as `bm25s.BM25.get_scores_from_ids` does.

    bm25s scatters each query term's postings into the score array with `np.add.at`. A term like "the" has
    postings in most documents, so it dominates a query's cost; its dense row adds the same float32 values in
    the same order (0.0 elsewhere), which is why the scores are identical, not just close.
    """

    def __init__(self, bm25: bm25s.BM25) -> None:
        """:param bm25: An indexed bm25s model; its vocabulary and score matrix are shared, not copied."""
        self._bm25 = bm25
        self._data: np.ndarray = bm25.scores["data"]
        self._indices: np.ndarray = bm25.scores["indices"]
        self._indptr: np.ndarray = bm25.scores["indptr"]
        self._num_docs = int(bm25.scores["num_docs"])
        self._dtype = np.dtype(bm25.dtype)
        self._nonoccurrence: np.ndarray | None = bm25.nonoccurrence_array
        frequencies = np.diff(self._indptr)
        commonest = np.argsort(-frequencies, kind="stable")[:DENSE_MAX_TERMS]
        common = commonest[frequencies[commonest] * DENSE_MIN_SHARE >= self._num_docs]
        self._rows = {int(term): row for row, term in enumerate(common)}
        self._dense = np.zeros((len(common), self._num_docs), dtype=self._dtype)
        for row, term in enumerate(common):
            postings = slice(self._indptr[term], self._indptr[term + 1])
            self._dense[row, self._indices[postings]] = self._data[postings]

    def token_ids(self, tokens: list[str]) -> list[int]:
        """The vocabulary ids of `tokens`; tokens the index never saw are dropped."""
        return self._bm25.get_tokens_ids(tokens)

    def rarest_postings(self, token_ids: list[int], at_least: int) -> np.ndarray | None:
        """The documents holding the query's rarest term found in at least `at_least` documents (None when no term
        is): their `at_least`-th best score bounds the query's from below (top_indices' `sample`)."""
        sizes = [(int(self._indptr[t + 1] - self._indptr[t]), t) for t in set(token_ids)]
        usable = [(size, term) for size, term in sizes if size >= at_least]
        if not usable:
            return None
        _, term = min(usable)
        return self._indices[self._indptr[term] : self._indptr[term + 1]]

    @property
    def dense_terms(self) -> int:
        """How many terms are held as dense rows."""
        return len(self._rows)

    def __call__(self, token_ids: list[int]) -> np.ndarray:
        """The BM25 score of every document for these vocabulary ids (repeats count again, as in bm25s)."""
        scores = np.zeros(self._num_docs, dtype=self._dtype)
        for term in token_ids:
            row = self._rows.get(term)
            if row is None:
                postings = slice(self._indptr[term], self._indptr[term + 1])
                np.add.at(scores, self._indices[postings], self._data[postings])
            else:
                scores += self._dense[row]
        if self._nonoccurrence is not None:
            # bm25l and bm25+ give every document a score for the terms it lacks.
            scores += self._nonoccurrence[np.asarray(token_ids, dtype=np.intp)].sum()
        return scores
