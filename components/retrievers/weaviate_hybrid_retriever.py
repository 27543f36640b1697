"""Weaviate's server-side hybrid search with its fusion choice, which Haystack's WeaviateHybridRetriever lacks."""

from typing import Any

from haystack import Document, component, default_from_dict, default_to_dict
from haystack.document_stores.types import FilterPolicy
from haystack_integrations.document_stores.weaviate import WeaviateDocumentStore
from haystack_integrations.document_stores.weaviate._filters import convert_filters
from weaviate.classes.query import HybridFusion

from components.retrievers.retrieval import check_top_k, filter_policy_of, scoped_search
from components.retrievers.weaviate_search import refused_filters, weaviate_filters

FUSIONS = {"ranked": HybridFusion.RANKED, "relative_score": HybridFusion.RELATIVE_SCORE}


@component
class FusionWeaviateHybridRetriever:
    """
    One Weaviate hybrid query (BM25 and vector search fused on the server), to compare with our own fusion on the
    same collection (`pipeline=weaviate_hybrid` against `pipeline=hybrid store=weaviate`).

    Haystack's WeaviateHybridRetriever passes only `alpha`; this also passes `fusion_type` ("ranked": reciprocal
    rank, "relative_score": min-max scaled scores, Weaviate's default), and keeps our retrievers' contract:
    `merge` filters only narrow, `top_k=0` returns nothing, documents come back without vectors.

    ### Usage example
    ```python
    retriever = FusionWeaviateHybridRetriever(document_store=store, alpha=0.5, fusion_type="ranked")
    retriever.run(query="hybrid retrieval", query_embedding=[0.1] * 384)["documents"]
    ```
    """

    def __init__(
        self,
        *,
        document_store: WeaviateDocumentStore,
        top_k: int = 10,
        alpha: float = 0.5,
        fusion_type: str = "relative_score",
        filters: dict[str, Any] | None = None,
        filter_policy: str | FilterPolicy = FilterPolicy.MERGE,
    ) -> None:
        """
        :param document_store: The Weaviate store whose collection is searched (`store=weaviate`).
        :param top_k: Default number of documents to return; must be > 0.
        :param alpha: 0 is BM25 alone, 1 the vector search alone.
        :param fusion_type: "relative_score" or "ranked".
        :param filters: Filters every query applies.
        :param filter_policy: "merge" (default) ANDs a query's filters with `filters`; "replace" uses the query's.
        """
        if not isinstance(document_store, WeaviateDocumentStore):
            raise ValueError(f"needs a WeaviateDocumentStore (store=weaviate), got {type(document_store).__name__}")
        check_top_k(top_k, allow_zero=False)
        if not 0.0 <= alpha <= 1.0:
            raise ValueError(f"alpha must be between 0 and 1, got {alpha}")
        if fusion_type not in FUSIONS:
            raise ValueError(f"fusion_type must be one of {sorted(FUSIONS)}, got {fusion_type!r}")
        self.document_store = document_store
        self.top_k = top_k
        self.alpha = alpha
        self.fusion_type = fusion_type
        self.filters = filters
        self.filter_policy = filter_policy_of(filter_policy, filters)
        self._properties: list[str] | None = None

    def to_dict(self) -> dict[str, Any]:
        return default_to_dict(
            self,
            document_store=self.document_store.to_dict(),
            top_k=self.top_k,
            alpha=self.alpha,
            fusion_type=self.fusion_type,
            filters=self.filters,
            filter_policy=self.filter_policy.value,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "FusionWeaviateHybridRetriever":
        params = data["init_parameters"]
        params["document_store"] = WeaviateDocumentStore.from_dict(params["document_store"])
        return default_from_dict(cls, data)

    @component.output_types(documents=list[Document])
    def run(
        self,
        query: str,
        query_embedding: list[float],
        filters: dict[str, Any] | None = None,
        top_k: int | None = None,
    ) -> dict[str, list[Document]]:
        """
        :param query: The query text, for the BM25 half.
        :param query_embedding: The query vector, for the vector half.
        :param filters: Haystack metadata filters, combined with the init-time ones by `filter_policy`.
        :param top_k: Maximum number of documents; overrides the init value, 0 returns none.
        :returns: `documents`: best first, `score` = Weaviate's fused score.
        """
        search = scoped_search(self.filter_policy, self.filters, self.top_k, filters, top_k, rewrite=weaviate_filters)
        if search is None:
            return {"documents": []}
        collection = self.document_store.collection
        if self._properties is None:  # the schema is fixed once the collection is built: read once, not per query
            self._properties = [p.name for p in collection.config.get().properties]
        with refused_filters(search["filters"]):
            result = collection.query.hybrid(
                query=query,
                vector=query_embedding,
                alpha=self.alpha,
                fusion_type=FUSIONS[self.fusion_type],
                filters=convert_filters(search["filters"]) if search["filters"] else None,
                limit=search["top_k"],
                query_properties=["content"],
                return_properties=self._properties,
                return_metadata=["score"],
            )
        return {"documents": [WeaviateDocumentStore._to_document(found) for found in result.objects]}
