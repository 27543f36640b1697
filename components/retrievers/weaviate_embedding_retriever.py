"""Weaviate's vector retriever under the contract our in-memory retrievers keep, so a store swap changes one thing."""

from dataclasses import replace
from typing import Any

from haystack import Document, component
from haystack.document_stores.types import FilterPolicy
from haystack_integrations.components.retrievers.weaviate import WeaviateEmbeddingRetriever
from haystack_integrations.document_stores.weaviate import WeaviateDocumentStore

from components.retrievers.retrieval import check_top_k, filter_policy_of
from components.retrievers.weaviate_search import ScopedWeaviateSearch


def as_cosine(document: Document) -> Document:
    """Weaviate scores a cosine-distance search by certainty, (1 + cosine) / 2; fusion thresholds and the
    calibrated bands are on cosine, as `MatrixEmbeddingRetriever` returns it. The vector stays on the server."""
    score = None if document.score is None else 2.0 * document.score - 1.0
    return replace(document, score=score, embedding=None)


@component
class ScopedWeaviateEmbeddingRetriever(ScopedWeaviateSearch, WeaviateEmbeddingRetriever):
    """
    Haystack's WeaviateEmbeddingRetriever (the server's vector index) with the behaviour of
    `MatrixEmbeddingRetriever`:

    - `filter_policy="merge"` always ANDs a query's filters with the init-time ones, so a request can only narrow
      them; Haystack's merge lets a runtime condition on the same field replace the init-time one;
    - `top_k=0` returns no documents (Haystack's treats 0 as "use the default");
    - `score` is the cosine similarity, and documents come back without their vectors.

    ### Usage example
    ```python
    retriever = ScopedWeaviateEmbeddingRetriever(document_store=store, top_k=5)
    retriever.run(query_embedding=[0.1] * 384)["documents"]
    ```
    """

    _returned = staticmethod(as_cosine)

    def __init__(
        self,
        *,
        document_store: WeaviateDocumentStore,
        filters: dict[str, Any] | None = None,
        top_k: int = 10,
        distance: float | None = None,
        certainty: float | None = None,
        filter_policy: str | FilterPolicy = FilterPolicy.MERGE,
    ) -> None:
        """
        :param document_store: The Weaviate store whose collection is searched.
        :param filters: Filters every query applies.
        :param top_k: Default number of documents to return; must be > 0.
        :param distance: Largest cosine distance returned (Weaviate's own cut-off); None: no cut-off.
        :param certainty: Smallest certainty returned; exclusive with `distance`.
        :param filter_policy: "merge" (default) ANDs a query's filters with `filters`; "replace" uses the query's.
        """
        check_top_k(top_k, allow_zero=False)
        WeaviateEmbeddingRetriever.__init__(  # not super(): @component rebuilds the class
            self,
            document_store=document_store,
            filters=filters,
            top_k=top_k,
            distance=distance,
            certainty=certainty,
            filter_policy=filter_policy_of(filter_policy, filters),
        )

    @component.output_types(documents=list[Document])
    def run(
        self, query_embedding: list[float], filters: dict[str, Any] | None = None, top_k: int | None = None
    ) -> dict[str, list[Document]]:
        """
        :param query_embedding: The query vector, of the collection's dimension.
        :param filters: Haystack metadata filters, combined with the init-time ones by `filter_policy`.
        :param top_k: Maximum number of documents; overrides the init value, 0 returns none.
        :returns: `documents`: best first, `score` = cosine similarity.
        """
        return self._documents(
            self._document_store._embedding_retrieval, filters, top_k, **self._vector_query(query_embedding)
        )

    @component.output_types(documents=list[Document])
    async def run_async(
        self, query_embedding: list[float], filters: dict[str, Any] | None = None, top_k: int | None = None
    ) -> dict[str, list[Document]]:
        """As `run`, on the store's async client."""
        retrieve = self._document_store._embedding_retrieval_async
        return await self._documents_async(retrieve, filters, top_k, **self._vector_query(query_embedding))

    def _vector_query(self, query_embedding: list[float]) -> dict[str, Any]:
        return {"query_embedding": query_embedding, "distance": self._distance, "certainty": self._certainty}
