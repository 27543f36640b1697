"""ingest.update: an incremental build equals a cold one and ingests only what changed."""

from dataclasses import replace

import numpy as np
from haystack import Document
from haystack.document_stores.in_memory import InMemoryDocumentStore

from pipelines.index import build_index, ingest_spec
from tests.support.ingest_corpus import DOCS
from tests.support.shipped import composed


def test_an_updated_index_equals_a_cold_build_and_ingests_only_what_changed(tmp_path, monkeypatch):
    from pipelines.index import build as ingest

    cfg = composed("ingest.chunk_size=120", "ingest.chunk_overlap=20")
    spec = ingest_spec(cfg.ingest, cfg.models.embedder.document)
    gone = Document(id="gone.md", content="A page that is deleted later. " * 10, meta={"doc_id": "gone.md"})
    build_index([*DOCS, gone], spec, InMemoryDocumentStore(), tmp_path / "cache", "before", "lineage")
    changed = replace(DOCS[1], content=DOCS[1].content + "新增：病假每年十天。")
    retagged = replace(DOCS[0], meta={**DOCS[0].meta, "tenant": "t9"})  # metadata counts as a change too
    added = Document(id="new.md", content="A new page about parking. " * 8, meta={"doc_id": "new.md"})
    corpus = [retagged, changed, added]

    ingested = []
    real_build = ingest.build_pipeline

    def recording(spec, resources, key):
        pipeline = real_build(spec, resources, key=key)
        run = pipeline.run
        pipeline.run = lambda documents: ingested.extend(d.id for d in documents) or run(documents=documents)
        return pipeline

    monkeypatch.setattr(ingest, "build_pipeline", recording)
    updated_store = InMemoryDocumentStore()
    updated = build_index(corpus, spec, updated_store, tmp_path / "cache", "after", "lineage", update=True)
    assert updated.update.base == "before" and sorted(ingested) == ["en/a.md", "new.md", "zh/b.md"]
    assert updated.update.counts() == {"reused_documents": 0, "ingested_documents": 3, "removed_documents": 1}

    ingested.clear()
    again = [retagged, changed]  # new.md removed, nothing else changed since "after"
    second = build_index(again, spec, InMemoryDocumentStore(), tmp_path / "cache", "again", "lineage", update=True)
    assert second.update.base == "after" and ingested == []
    assert second.update.counts() == {"reused_documents": 2, "ingested_documents": 0, "removed_documents": 1}

    cold_store = InMemoryDocumentStore()
    build_index(corpus, spec, cold_store, tmp_path / "cold", "after", "lineage")
    by_id = lambda store: {c.id: c for c in store.filter_documents()}  # noqa: E731
    cold, incremental = by_id(cold_store), by_id(updated_store)
    assert sorted(cold) == sorted(incremental) and all(c.meta.get("doc_id") != "gone.md" for c in incremental.values())
    for chunk_id, chunk in cold.items():
        assert (incremental[chunk_id].content, incremental[chunk_id].meta) == (chunk.content, chunk.meta)
        assert np.allclose(incremental[chunk_id].embedding, chunk.embedding, atol=1e-5)


def test_an_update_without_an_earlier_index_of_its_lineage_is_a_cold_build(tmp_path):
    cfg = composed("ingest.chunk_size=120", "ingest.chunk_overlap=20")
    spec = ingest_spec(cfg.ingest, None)
    build_index(DOCS, spec, InMemoryDocumentStore(), tmp_path, "other", "another-lineage")
    info = build_index(DOCS, spec, InMemoryDocumentStore(), tmp_path, "fp", "lineage", update=True)
    assert info.update is None and not info.cache_hit and info.chunks > 4


def test_an_update_keeps_the_parent_blocks_of_unchanged_documents_and_equals_a_cold_build(tmp_path):
    cfg = composed("ingest=parent_child", "ingest.chunk_size=120", "ingest.parent_size=400")
    spec = ingest_spec(cfg.ingest, None)
    build_index(DOCS, spec, InMemoryDocumentStore(), tmp_path / "cache", "before", "lineage",
                parents=InMemoryDocumentStore())
    corpus = [DOCS[0], replace(DOCS[1], content=DOCS[1].content + "新增：病假每年十天。")]
    updated, cold = InMemoryDocumentStore(), InMemoryDocumentStore()
    info = build_index(corpus, spec, InMemoryDocumentStore(), tmp_path / "cache", "after", "lineage", update=True,
                       parents=updated)
    assert info.update.counts() == {"reused_documents": 1, "ingested_documents": 1, "removed_documents": 0}
    build_index(corpus, spec, InMemoryDocumentStore(), tmp_path / "cold", "after", "lineage", parents=cold)
    records = lambda store: sorted((d.to_dict() for d in store.filter_documents()), key=lambda r: r["id"])  # noqa: E731
    assert records(updated) == records(cold) and {d.meta["doc_id"] for d in updated.filter_documents()} == {"en/a.md", "zh/b.md"}
