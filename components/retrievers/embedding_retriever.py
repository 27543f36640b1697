"""Dense retrieval from one float32 matrix, the store's own (mapped from the snapshot) or built once from any
Haystack DocumentStore."""

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
from haystack import Document, component, default_from_dict, default_to_dict
from haystack.document_stores.types import DocumentStore, FilterPolicy

from components.retrievers.document_masks import DocumentMasks
from components.retrievers.retrieval import (
    check_document_store,
    check_top_k,
    effective_filters,
    filter_policy_of,
    stored_rows,
    top_indices,
)

SIMILARITIES = ("cosine", "dot_product")


@component
class MatrixEmbeddingRetriever:
    """
    Exact nearest-neighbour retrieval with one matrix-vector product per query.

    Haystack's InMemoryEmbeddingRetriever rebuilds a numpy array from every document's Python list on each
    query (~440 ms at 30k documents); this takes the matrix once in `warm_up()`, so a query at 100k x 384
    costs a few milliseconds. Scores are the raw cosine similarity (or dot product), as in Haystack with
    `scale_score=False`.

    ### Usage example
    ```python
    retriever = MatrixEmbeddingRetriever(document_store=store, top_k=5)
    retriever.warm_up()
    retriever.run(query_embedding=[0.1, 0.3, ...])["documents"]
    ```
    """

    def __init__(
        self,
        document_store: DocumentStore,
        top_k: int = 10,
        similarity: str = "cosine",
        filters: dict[str, Any] | None = None,
        filter_policy: str | FilterPolicy = FilterPolicy.MERGE,
    ) -> None:
        """
        :param document_store: The store whose document embeddings are indexed (read once, in `warm_up()`).
        :param top_k: Default number of documents to return; must be > 0.
        :param similarity: "cosine" or "dot_product".
        :param filters: Filters every query applies, e.g. a deployment's `meta.lang == "en"`.
        :param filter_policy: "merge" (default): a query's filters are ANDed with `filters`, so they can only narrow
            them; "replace": a query's filters take their place (Haystack's default).
        """
        check_document_store(document_store)
        check_top_k(top_k, allow_zero=False)
        if similarity not in SIMILARITIES:
            raise ValueError(f"similarity must be one of {list(SIMILARITIES)}, got {similarity!r}")
        self.document_store = document_store
        self.top_k = top_k
        self.similarity = similarity
        self.filter_policy = filter_policy_of(filter_policy, filters)
        self.filters = filters
        self._documents: Sequence[Document] = []
        self._matrix = np.zeros((0, 0), dtype=np.float32)
        self._row_scale: np.ndarray | None = None  # cosine: 1 / each row's norm
        self._masks = DocumentMasks([])
        self._is_warmed_up = False

    def warm_up(self) -> None:
        """Take the store's documents and their matrix (mapped from the snapshot when the store maps one) and,
        for cosine, the inverse of each row's norm: the matrix itself is never copied."""
        if self._is_warmed_up:
            return
        rows = stored_rows(self.document_store)
        if rows.unembedded is not None or (rows.embeddings is None and rows.documents):
            first = rows.unembedded or rows.documents[0].id
            raise ValueError(
                f"Document {first!r} has no embedding; embed every document before indexing "
                "(and make sure the document store returns embeddings)"
            )
        self._matrix = rows.embeddings if rows.embeddings is not None else np.zeros((0, 0), dtype=np.float32)
        if self.similarity == "cosine":
            norms = np.sqrt(np.einsum("ij,ij->i", self._matrix, self._matrix, dtype=np.float32))
            self._row_scale = (1.0 / np.where(norms == 0.0, 1.0, norms)).astype(np.float32)
        self._documents = rows.documents
        self._masks = rows.masks
        self._is_warmed_up = True

    def to_dict(self) -> dict[str, Any]:
        """Serialise the component; the store is serialised with its own `to_dict()`."""
        return default_to_dict(
            self,
            document_store=self.document_store,
            top_k=self.top_k,
            similarity=self.similarity,
            filters=self.filters,
            filter_policy=self.filter_policy.value,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "MatrixEmbeddingRetriever":
        """Deserialise the component; the store is rebuilt with its own `from_dict()`."""
        return default_from_dict(cls, data)

    @component.output_types(documents=list[Document])
    def run(
        self, query_embedding: list[float], top_k: int | None = None, filters: dict[str, Any] | None = None
    ) -> dict[str, list[Document]]:
        """
        Return the documents most similar to `query_embedding`.

        :param query_embedding: The query vector, of the documents' dimension.
        :param top_k: Maximum number of documents; overrides the init value, 0 returns none.
        :param filters: Haystack metadata filters; non-matching documents are excluded before ranking. Combined
            with the init-time filters by `filter_policy`.
        :returns: `documents`: copies of the stored documents (without embedding) with `score` = similarity,
            best first.
        """
        top_k = self.top_k if top_k is None else top_k
        check_top_k(top_k, allow_zero=True)
        self.warm_up()
        if not self._documents or top_k == 0:
            return {"documents": []}
        query = np.array(query_embedding, dtype=np.float32)
        if query.ndim != 1:
            raise ValueError(f"query_embedding must be a flat list of floats, got shape {query.shape}")
        if len(query) != self._matrix.shape[1]:
            raise ValueError(
                f"query_embedding has dimension {len(query)}, the documents have dimension "
                f"{self._matrix.shape[1]}; embed queries and documents with the same model"
            )
        if self.similarity == "cosine":
            norm = float(np.linalg.norm(query))
            if norm:
                query /= norm
        scores = self._matrix @ query
        if self._row_scale is not None:
            scores *= self._row_scale
        filters = effective_filters(self.filter_policy, self.filters, filters)
        if filters:
            scores[~self._masks.mask(filters)] = -np.inf
        best = top_indices(scores, top_k, floor=-np.inf)
        return {"documents": [replace(self._documents[i], score=float(scores[i])) for i in best.tolist()]}
