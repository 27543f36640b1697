import numpy as np
import pytest
from haystack import Document, Pipeline
from haystack.components.retrievers.in_memory import InMemoryEmbeddingRetriever
from haystack.document_stores.in_memory import InMemoryDocumentStore

from components.retrievers.embedding_retriever import MatrixEmbeddingRetriever

DIM = 16


def _store(count: int = 60, similarity: str = "cosine", seed: int = 0) -> InMemoryDocumentStore:
    rng = np.random.default_rng(seed)
    store = InMemoryDocumentStore(embedding_similarity_function=similarity)
    store.write_documents(
        [
            Document(
                id=f"doc{i:03d}#0-5",
                content=f"chunk {i}",
                embedding=rng.normal(size=DIM).tolist(),
                meta={"tenant": f"t{i % 3}"},
            )
            for i in range(count)
        ]
    )
    return store


def _query(seed: int = 1) -> list[float]:
    return np.random.default_rng(seed).normal(size=DIM).tolist()


def _ids(result: dict) -> list[str]:
    return [doc.id for doc in result["documents"]]


class TestMatchesHaystack:
    @pytest.mark.parametrize("similarity", ["cosine", "dot_product"])
    def test_ranking_and_scores_equal_in_memory_embedding_retriever(self, similarity):
        store = _store(similarity=similarity)
        ours = MatrixEmbeddingRetriever(store, top_k=10, similarity=similarity)
        theirs = InMemoryEmbeddingRetriever(store, top_k=10)
        for seed in range(5):
            expected = theirs.run(query_embedding=_query(seed))["documents"]
            got = ours.run(query_embedding=_query(seed))["documents"]
            assert [doc.id for doc in got] == [doc.id for doc in expected]
            np.testing.assert_allclose(
                [doc.score for doc in got], [doc.score for doc in expected], rtol=1e-5, atol=1e-6
            )

    def test_cosine_scores_are_raw_similarities(self):
        store = InMemoryDocumentStore()
        store.write_documents(
            [
                Document(id="same", content="x", embedding=[2.0, 0.0]),
                Document(id="orthogonal", content="y", embedding=[0.0, 3.0]),
                Document(id="opposite", content="z", embedding=[-1.0, 0.0]),
            ]
        )
        result = MatrixEmbeddingRetriever(store).run(query_embedding=[5.0, 0.0])
        assert _ids(result) == ["same", "orthogonal", "opposite"]
        assert [doc.score for doc in result["documents"]] == pytest.approx([1.0, 0.0, -1.0])


class TestRun:
    def test_top_k(self):
        retriever = MatrixEmbeddingRetriever(_store(), top_k=3)
        assert len(retriever.run(query_embedding=_query())["documents"]) == 3
        assert len(retriever.run(query_embedding=_query(), top_k=100)["documents"]) == 60
        assert retriever.run(query_embedding=_query(), top_k=0) == {"documents": []}
        with pytest.raises(ValueError, match="top_k"):
            retriever.run(query_embedding=_query(), top_k=-1)

    def test_filters_apply_before_ranking(self):
        retriever = MatrixEmbeddingRetriever(_store(), top_k=100)
        filters = {"field": "meta.tenant", "operator": "==", "value": "t1"}
        documents = retriever.run(query_embedding=_query(), filters=filters)["documents"]
        assert len(documents) == 20
        assert {doc.meta["tenant"] for doc in documents} == {"t1"}
        assert [doc.score for doc in documents] == sorted((doc.score for doc in documents), reverse=True)
        none = {"field": "meta.tenant", "operator": "==", "value": "nobody"}
        assert retriever.run(query_embedding=_query(), filters=none) == {"documents": []}

    def test_init_filters_merge_with_a_querys(self):
        t1 = {"field": "meta.tenant", "operator": "==", "value": "t1"}
        retriever = MatrixEmbeddingRetriever(_store(), top_k=100, filters=t1)
        assert {doc.meta["tenant"] for doc in retriever.run(query_embedding=_query())["documents"]} == {"t1"}
        t2 = {"field": "meta.tenant", "operator": "==", "value": "t2"}
        assert retriever.run(query_embedding=_query(), filters=t2) == {"documents": []}

    def test_filtered_ranking_equals_ranking_of_filtered_store(self):
        store = _store()
        filters = {"field": "meta.tenant", "operator": "in", "value": ["t0", "t2"]}
        subset = InMemoryDocumentStore()
        subset.write_documents(store.filter_documents(filters))
        full = MatrixEmbeddingRetriever(store, top_k=7).run(query_embedding=_query(), filters=filters)
        assert _ids(full) == _ids(MatrixEmbeddingRetriever(subset, top_k=7).run(query_embedding=_query()))

    def test_ties_are_broken_by_id(self):
        store = InMemoryDocumentStore()
        store.write_documents([Document(id=i, content=i, embedding=[1.0, 1.0]) for i in ("z", "m", "a")])
        assert _ids(MatrixEmbeddingRetriever(store, top_k=2).run(query_embedding=[1.0, 0.0])) == ["a", "m"]

    def test_returns_copies_without_embedding(self):
        store = _store()
        retriever = MatrixEmbeddingRetriever(store, top_k=1)
        first = retriever.run(query_embedding=_query(1))["documents"][0]
        second = retriever.run(query_embedding=np.asarray(_query(1)) * 2)["documents"][0]
        assert first is not second and first.embedding is None
        assert store.filter_documents({"field": "id", "operator": "==", "value": first.id})[0].score is None

    def test_query_array_is_not_modified(self):
        query = np.asarray(_query(), dtype=np.float32)
        before = query.copy()
        MatrixEmbeddingRetriever(_store()).run(query_embedding=query)
        np.testing.assert_array_equal(query, before)

    def test_zero_query_and_zero_document_vectors_do_not_fail(self):
        store = InMemoryDocumentStore()
        store.write_documents([Document(id="zero", content="x", embedding=[0.0, 0.0])])
        assert [doc.score for doc in MatrixEmbeddingRetriever(store).run([0.0, 0.0])["documents"]] == [0.0]

    def test_dimension_mismatch_names_both_dimensions(self):
        with pytest.raises(ValueError, match=r"query_embedding has dimension 3.*dimension 16"):
            MatrixEmbeddingRetriever(_store()).run(query_embedding=[1.0, 2.0, 3.0])

    def test_empty_store(self):
        assert MatrixEmbeddingRetriever(InMemoryDocumentStore()).run(query_embedding=[1.0]) == {
            "documents": []
        }

    def test_runs_in_a_pipeline(self):
        store = _store()
        pipe = Pipeline()
        pipe.add_component("dense", MatrixEmbeddingRetriever(store, top_k=4))
        expected = InMemoryEmbeddingRetriever(store, top_k=4).run(query_embedding=_query())
        assert _ids(pipe.run({"dense": {"query_embedding": _query()}})["dense"]) == _ids(expected)


class TestWarmUp:
    def test_missing_embedding_names_the_document(self):
        store = _store(count=3)
        store.write_documents([Document(id="naked#0-1", content="no vector")])
        with pytest.raises(ValueError, match="naked#0-1"):
            MatrixEmbeddingRetriever(store).warm_up()

    def test_inconsistent_dimensions_name_the_document(self):
        store = _store(count=3)
        store.write_documents([Document(id="zzz", content="short", embedding=[1.0, 2.0])])
        with pytest.raises(ValueError, match=r"'zzz'.*dimension 2.*dimension 16"):
            MatrixEmbeddingRetriever(store).warm_up()

    def test_warm_up_reads_the_store_once(self, monkeypatch):
        store = _store()
        calls = []
        real = store.filter_documents
        monkeypatch.setattr(store, "filter_documents", lambda *a, **kw: calls.append(1) or real(*a, **kw))
        retriever = MatrixEmbeddingRetriever(store)
        retriever.warm_up()
        retriever.run(query_embedding=_query())
        assert len(calls) == 1


class TestConfiguration:
    def test_to_dict_from_dict_round_trip(self):
        store = _store(count=2)
        data = MatrixEmbeddingRetriever(store, top_k=4, similarity="dot_product").to_dict()
        assert data == {
            "type": "components.retrievers.embedding_retriever.MatrixEmbeddingRetriever",
            "init_parameters": {"document_store": store.to_dict(), "top_k": 4, "similarity": "dot_product",
                                "filters": None, "filter_policy": "merge"},
        }
        clone = MatrixEmbeddingRetriever.from_dict(data)
        assert isinstance(clone.document_store, InMemoryDocumentStore)
        assert clone.to_dict() == data

    @pytest.mark.parametrize(
        ("kwargs", "parameter"),
        [
            ({"document_store": "store"}, "document_store"),
            ({"top_k": 0}, "top_k"),
            ({"similarity": "l2"}, "similarity"),
        ],
    )
    def test_invalid_parameters_are_named(self, kwargs, parameter):
        with pytest.raises((TypeError, ValueError), match=parameter):
            MatrixEmbeddingRetriever(**{"document_store": InMemoryDocumentStore(), **kwargs})
