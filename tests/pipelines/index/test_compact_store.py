"""CompactDocumentStore: Haystack's store contract, the retrievers' results equal over it and over Haystack's
in-memory store, and a snapshot served by mapping its files."""

import gc
from dataclasses import replace

import numpy as np
import pytest
from haystack import Document
from haystack.document_stores.errors import DuplicateDocumentError
from haystack.document_stores.in_memory import InMemoryDocumentStore
from haystack.document_stores.types import DuplicatePolicy

from components.retrievers.bm25_retriever import BM25sRetriever
from components.retrievers.embedding_retriever import MatrixEmbeddingRetriever
from pipelines.index import build as index_build
from pipelines.index import build_index
from pipelines.index.compact_store import CompactDocumentStore
from pipelines.index.snapshot import (
    CHUNKS,
    MANIFEST,
    DamagedIndexError,
    load_snapshot,
    map_snapshot,
    save_snapshot,
)
from tests.support.index_builds import fast_spec
from tests.support.ingest_corpus import DOCS, chunk_records

DIM = 8
WORDS = ["alpha", "beta", "gamma", "delta", "annual", "leave", "policy", "salary"]


def documents(count: int = 40, seed: int = 0) -> list[Document]:
    rng = np.random.default_rng(seed)
    return [
        Document(
            id=f"doc{(i * 7) % count:03d}#0-5",  # not written in id order
            content=" ".join(rng.choice(WORDS, size=5)),
            embedding=rng.normal(size=DIM).tolist(),
            meta={"doc_id": f"doc{i}", "tenant": f"t{i % 3}", **({"acl": ["hr"]} if i % 4 == 0 else {})},
        )
        for i in range(count)
    ]


def results(retriever, **query):
    retriever.warm_up()
    return [(d.id, d.content, d.meta, round(d.score, 5)) for d in retriever.run(**query)["documents"]]


def test_store_contract_writes_filters_overwrites_and_deletes():
    store = CompactDocumentStore()
    docs = documents(6)
    assert store.write_documents(docs) == 6
    with pytest.raises(DuplicateDocumentError):
        store.write_documents(docs[:1])
    assert store.write_documents(docs[:1], policy=DuplicatePolicy.SKIP) == 0
    changed = Document(id=docs[0].id, content="changed", meta=docs[0].meta, embedding=[1.0] * DIM)
    store.write_documents([changed], policy=DuplicatePolicy.OVERWRITE)
    assert store.count_documents() == 6
    stored = {d.id: d for d in store.filter_documents()}
    assert stored[docs[0].id].content == "changed" and stored[docs[0].id].embedding == [1.0] * DIM
    assert stored[docs[1].id].embedding == pytest.approx(docs[1].embedding)
    tenant = store.filter_documents({"field": "meta.tenant", "operator": "==", "value": "t1"})
    assert sorted(d.id for d in tenant) == sorted(d.id for d in docs if d.meta["tenant"] == "t1")
    store.delete_documents([docs[1].id, "unknown"])
    assert sorted(d.id for d in store.filter_documents()) == sorted(d.id for d in docs if d.id != docs[1].id)
    assert CompactDocumentStore.from_dict(store.to_dict()).to_dict() == store.to_dict()


def test_to_dict_is_exact_and_stores_of_one_index_name_share_their_chunks_while_one_lives():
    store = CompactDocumentStore(index="run-1")
    assert store.to_dict() == {
        "type": "pipelines.index.compact_store.CompactDocumentStore",
        "init_parameters": {"embedding_similarity_function": "cosine", "index": "run-1"},
    }
    store.write_documents(documents())
    again = CompactDocumentStore.from_dict(store.to_dict())  # a logged pipeline.yaml rebuilt in the same process
    assert [d.id for d in again.filter_documents()] == [d.id for d in store.filter_documents()]
    assert CompactDocumentStore().count_documents() == 0 and CompactDocumentStore().index != store.index
    del store, again
    gc.collect()
    assert CompactDocumentStore(index="run-1").count_documents() == 0  # nothing kept once no store of it lives


@pytest.mark.parametrize("mapped", [False, True])
@pytest.mark.parametrize("similarity", ["cosine", "dot_product"])
def test_retrievers_return_what_they_return_over_haystacks_store(tmp_path, mapped, similarity):
    docs = documents()
    theirs = InMemoryDocumentStore()
    theirs.write_documents(docs)
    ours = CompactDocumentStore()
    if mapped:
        save_snapshot(docs, tmp_path / "fp", {})
        load_snapshot(tmp_path / "fp", ours)
    else:
        ours.write_documents(docs)
    scope = {  # the access fields, read from the records when a snapshot is mapped
        "operator": "OR",
        "conditions": [
            {"field": "meta.tenant", "operator": "in", "value": ["t2"]},
            {"field": "meta.acl", "operator": "==", "value": "hr"},
        ],
    }
    query = np.random.default_rng(1).normal(size=DIM).tolist()
    for store_query in ({"query_embedding": query}, {"query_embedding": query, "filters": scope}):
        expected = results(MatrixEmbeddingRetriever(theirs, top_k=7, similarity=similarity), **store_query)
        assert (
            results(MatrixEmbeddingRetriever(ours, top_k=7, similarity=similarity), **store_query) == expected
        )
    for store_query in ({"query": "annual leave"}, {"query": "annual leave", "filters": scope}):
        assert results(BM25sRetriever(ours, top_k=7), **store_query) == results(
            BM25sRetriever(theirs, top_k=7), **store_query
        )


def test_a_loaded_snapshot_is_mapped_not_copied(tmp_path):
    docs = documents()
    save_snapshot(docs, tmp_path / "fp", {})
    store = CompactDocumentStore()
    assert load_snapshot(tmp_path / "fp", store) == len(docs)
    rows = store.stored_rows()
    assert isinstance(rows.embeddings.base, np.memmap) and not rows.embeddings.flags.writeable
    assert [d.id for d in rows.documents] == sorted(d.id for d in docs)
    retriever = MatrixEmbeddingRetriever(store)
    retriever.warm_up()
    assert np.shares_memory(retriever._matrix, rows.embeddings)
    # a write after mapping changes the store, never the snapshot's files
    store.write_documents([Document(id="new", content="new", embedding=[0.5] * DIM)])
    assert store.count_documents() == len(docs) + 1
    again = CompactDocumentStore()
    assert load_snapshot(tmp_path / "fp", again) == len(docs)


def test_a_cold_build_serves_what_a_cached_one_does(tmp_path):
    spec = fast_spec()
    cold_store, reference = CompactDocumentStore(), InMemoryDocumentStore()
    cold = build_index(DOCS, spec, cold_store, tmp_path / "ours", "fp")
    build_index(DOCS, spec, reference, tmp_path / "theirs", "fp")
    warm_store = CompactDocumentStore()
    warm = build_index(DOCS, spec, warm_store, tmp_path / "ours", "fp")
    assert (cold.cache_hit, warm.cache_hit, cold.chunks) == (False, True, reference.count_documents())
    assert chunk_records(cold_store) == chunk_records(warm_store) == chunk_records(reference)
    assert isinstance(cold_store.stored_rows().embeddings.base, np.memmap)  # ingestion's copy was let go


def test_ingestion_in_batches_builds_what_one_run_builds(tmp_path, monkeypatch):
    whole = InMemoryDocumentStore()
    build_index(DOCS, fast_spec(), whole, tmp_path / "whole", "fp")
    monkeypatch.setattr(index_build, "INGEST_BATCH", 1)
    batched = CompactDocumentStore()
    build_index(DOCS, fast_spec(), batched, tmp_path / "batched", "fp")
    assert len(DOCS) > 1 and chunk_records(batched) == chunk_records(whole)


def test_an_update_takes_the_unchanged_chunks_with_their_vectors(tmp_path):
    spec = fast_spec()
    build_index(DOCS, spec, CompactDocumentStore(), tmp_path / "cache", "before", "lineage")
    corpus = [DOCS[0], replace(DOCS[1], content=DOCS[1].content + " Parking is free on Sundays.")]
    updated = CompactDocumentStore()
    info = build_index(corpus, spec, updated, tmp_path / "cache", "after", "lineage", update=True)
    assert info.update.counts() == {
        "reused_documents": 1,
        "ingested_documents": 1,
        "removed_documents": len(DOCS) - 2,
    }
    cold = InMemoryDocumentStore()
    build_index(corpus, spec, cold, tmp_path / "cold", "after", "lineage")
    assert chunk_records(updated) == chunk_records(cold)


def test_a_snapshot_out_of_id_order_is_damaged(tmp_path):
    save_snapshot(documents(4), tmp_path / "fp", {})
    lines = (tmp_path / "fp" / CHUNKS).read_text(encoding="utf-8").splitlines(keepends=True)
    (tmp_path / "fp" / CHUNKS).write_text("".join([lines[1], lines[0], *lines[2:]]), encoding="utf-8")
    with pytest.raises(DamagedIndexError, match=f"{CHUNKS} line 2 is out of id order"):
        map_snapshot(tmp_path / "fp")
    assert (tmp_path / "fp" / MANIFEST).exists()
