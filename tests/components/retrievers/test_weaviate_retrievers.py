"""The Weaviate retrievers keep our retrievers' contract. The store's search calls are recorded here (control flow
only); tests/pipelines/index/test_weaviate.py runs them against a real server when WEAVIATE_URL is set."""

import pytest
from haystack import Document
from haystack_integrations.document_stores.weaviate import WeaviateDocumentStore

from components.retrievers.weaviate_bm25_retriever import ScopedWeaviateBM25Retriever
from components.retrievers.weaviate_embedding_retriever import ScopedWeaviateEmbeddingRetriever, as_cosine
from components.retrievers.weaviate_search import weaviate_filters

TENANT = {"field": "meta.tenant", "operator": "==", "value": "acme"}
OTHER = {"field": "meta.tenant", "operator": "==", "value": "globex"}


@pytest.fixture
def store(monkeypatch):
    """A real WeaviateDocumentStore (it connects only when first used) whose two search calls are recorded."""
    store = WeaviateDocumentStore(url="http://127.0.0.1:9")
    calls = []

    def search(**kwargs):
        calls.append(kwargs)
        return [Document(id="a", content="x", embedding=[1.0, 0.0], score=0.9)]

    monkeypatch.setattr(store, "_bm25_retrieval", search)
    monkeypatch.setattr(store, "_embedding_retrieval", search)
    store.calls = calls
    return store


def run(retriever, **kwargs):
    if isinstance(retriever, ScopedWeaviateBM25Retriever):
        return retriever.run(query="leave", **kwargs)["documents"]
    return retriever.run(query_embedding=[1.0, 0.0], **kwargs)["documents"]


@pytest.fixture(params=[ScopedWeaviateBM25Retriever, ScopedWeaviateEmbeddingRetriever])
def kind(request):
    return request.param


def test_merge_ands_a_request_filter_on_the_same_field_instead_of_replacing(store, kind):
    """Haystack's merge would send only `globex` here; ours sends both, so a request cannot widen the scope."""
    run(kind(document_store=store, filters=TENANT), filters=OTHER)
    assert store.calls[-1]["filters"] == weaviate_filters({"operator": "AND", "conditions": [TENANT, OTHER]})


def test_replace_and_no_filters_pass_through(store, kind):
    run(kind(document_store=store, filters=TENANT, filter_policy="replace"), filters=OTHER)
    assert store.calls[-1]["filters"] == weaviate_filters(OTHER)
    run(kind(document_store=store))
    assert store.calls[-1]["filters"] is None


def test_top_k_zero_returns_nothing_without_asking_the_server(store, kind):
    assert run(kind(document_store=store, top_k=5), top_k=0) == [] and not store.calls
    run(kind(document_store=store, top_k=5))
    assert store.calls[-1]["top_k"] == 5
    with pytest.raises(ValueError, match="top_k"):
        kind(document_store=store, top_k=0)


def test_documents_come_back_without_vectors(store, kind):
    assert [d.embedding for d in run(kind(document_store=store))] == [None]


def test_certainty_becomes_cosine():
    assert as_cosine(Document(content="x", score=0.9)).score == pytest.approx(0.8)
    assert as_cosine(Document(content="x", score=0.5)).score == pytest.approx(0.0)
    assert as_cosine(Document(content="x")).score is None


def test_round_trips_through_to_dict(store, kind):
    retriever = kind(document_store=store, filters=TENANT, top_k=7)
    again = type(retriever).from_dict(retriever.to_dict())
    assert again.to_dict() == retriever.to_dict() and again._filter_policy.value == "merge"


class RecordingCollection:
    """What the hybrid retriever asks of the collection (control flow only)."""

    def __init__(self):
        self.calls, self.config, self.query = [], self, self

    def get(self):
        return type("Config", (), {"properties": [type("P", (), {"name": "content"})()]})()

    def hybrid(self, **kwargs):
        self.calls.append(kwargs)
        found = type("Object", (), {"properties": {"_original_id": "a", "content": "x"}, "vector": {},
                                    "metadata": type("M", (), {"score": 0.7, "certainty": None})()})()
        return type("Result", (), {"objects": [found]})()


def test_the_hybrid_retriever_passes_fusion_type_alpha_and_merged_filters():
    from weaviate.classes.query import HybridFusion

    from components.retrievers.weaviate_hybrid_retriever import FusionWeaviateHybridRetriever

    store = WeaviateDocumentStore(url="http://127.0.0.1:9")
    store._collection = collection = RecordingCollection()
    retriever = FusionWeaviateHybridRetriever(document_store=store, alpha=0.3, fusion_type="ranked", filters=TENANT)
    documents = retriever.run(query="leave", query_embedding=[1.0, 0.0], filters=OTHER)["documents"]
    call = collection.calls[-1]
    assert call["fusion_type"] == HybridFusion.RANKED and call["alpha"] == 0.3 and call["limit"] == 10
    assert {tuple(leaf.value) for leaf in call["filters"].filters} == {("acme",), ("globex",)}  # both, ANDed
    assert [(d.id, d.score, d.embedding) for d in documents] == [("a", 0.7, None)]
    assert retriever.run(query="q", query_embedding=[1.0], top_k=0)["documents"] == [] and len(collection.calls) == 1
    again = FusionWeaviateHybridRetriever.from_dict(retriever.to_dict())
    assert again.to_dict() == retriever.to_dict()
    with pytest.raises(ValueError, match="fusion_type"):
        FusionWeaviateHybridRetriever(document_store=store, fusion_type="max")


def test_weaviate_hybrid_on_the_in_memory_store_names_what_it_needs(tmp_path):
    from haystack.document_stores.in_memory import InMemoryDocumentStore

    from pipelines.builder import build_pipeline
    from pipelines.spec import PipelineConfigError
    from tests.support.shipped import composed

    with pytest.raises(PipelineConfigError, match=r"components.hybrid.*store=weaviate"):
        build_pipeline(composed("pipeline=weaviate_hybrid").pipeline,
                       {"store": InMemoryDocumentStore(), "index_dir": str(tmp_path)})


def test_a_filter_the_server_refuses_is_a_filter_error_naming_it(store, kind, monkeypatch):
    """A field the collection lacks is the request's fault (serve.py answers 400), not a client traceback."""
    from haystack.errors import FilterError
    from weaviate.exceptions import WeaviateQueryError

    def refuse(**kwargs):
        raise WeaviateQueryError("no such prop with name 'colour' found in class 'Ragtune_x'", "gRPC")

    monkeypatch.setattr(store, "_bm25_retrieval", refuse)
    monkeypatch.setattr(store, "_embedding_retrieval", refuse)
    colour = {"field": "meta.colour", "operator": "==", "value": "red"}
    with pytest.raises(FilterError, match=r"Weaviate refused the query's filters .*meta.colour.*no such prop"):
        run(kind(document_store=store), filters=colour)
    with pytest.raises(WeaviateQueryError):  # without filters it is the server's failure, left as it is
        run(kind(document_store=store))
