"""Weaviate's BM25 retriever under the contract our in-memory retrievers keep, so a store swap changes one thing."""

from typing import Any

from haystack import Document, component
from haystack.document_stores.types import FilterPolicy
from haystack_integrations.components.retrievers.weaviate import WeaviateBM25Retriever
from haystack_integrations.document_stores.weaviate import WeaviateDocumentStore

from components.retrievers.retrieval import check_top_k, filter_policy_of
from components.retrievers.weaviate_search import ScopedWeaviateSearch


@component
class ScopedWeaviateBM25Retriever(ScopedWeaviateSearch, WeaviateBM25Retriever):
    """
    Haystack's WeaviateBM25Retriever (BM25 on the server) with the behaviour of `BM25sRetriever`:

    - `filter_policy="merge"` always ANDs a query's filters with the init-time ones, so a request can only narrow
      them; Haystack's merge lets a runtime condition on the same field replace the init-time one;
    - `top_k=0` returns no documents (Haystack's treats 0 as "use the default");
    - documents come back without their vectors, which only the server needs.

    ### Usage example
    ```python
    retriever = ScopedWeaviateBM25Retriever(document_store=store, top_k=5)
    retriever.run(query="hybrid retrieval")["documents"]
    ```
    """

    def __init__(
        self,
        *,
        document_store: WeaviateDocumentStore,
        filters: dict[str, Any] | None = None,
        top_k: int = 10,
        filter_policy: str | FilterPolicy = FilterPolicy.MERGE,
    ) -> None:
        """
        :param document_store: The Weaviate store whose collection is searched.
        :param filters: Filters every query applies.
        :param top_k: Default number of documents to return; must be > 0.
        :param filter_policy: "merge" (default) ANDs a query's filters with `filters`; "replace" uses the query's.
        """
        check_top_k(top_k, allow_zero=False)
        WeaviateBM25Retriever.__init__(  # not super(): @component rebuilds the class
            self,
            document_store=document_store,
            filters=filters,
            top_k=top_k,
            filter_policy=filter_policy_of(filter_policy, filters),
        )

    @component.output_types(documents=list[Document])
    def run(
        self, query: str, filters: dict[str, Any] | None = None, top_k: int | None = None
    ) -> dict[str, list[Document]]:
        """
        :param query: The query text.
        :param filters: Haystack metadata filters, combined with the init-time ones by `filter_policy`.
        :param top_k: Maximum number of documents; overrides the init value, 0 returns none.
        :returns: `documents`: best first, `score` = Weaviate's BM25 score.
        """
        return self._documents(self._document_store._bm25_retrieval, filters, top_k, query=query)

    @component.output_types(documents=list[Document])
    async def run_async(
        self, query: str, filters: dict[str, Any] | None = None, top_k: int | None = None
    ) -> dict[str, list[Document]]:
        """As `run`, on the store's async client."""
        retrieve = self._document_store._bm25_retrieval_async
        return await self._documents_async(retrieve, filters, top_k, query=query)
