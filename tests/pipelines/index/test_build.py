"""build_index: a cold build, then the same fingerprint read back from its snapshot."""

import json

import pytest
from haystack.document_stores.in_memory import InMemoryDocumentStore

from pipelines.index import build_index, ingest_spec
from pipelines.index.snapshot import MANIFEST
from tests.support.ingest_corpus import DOCS
from tests.support.shipped import composed


@pytest.mark.parametrize("chunker", ["recursive", "markdown", "fixed"])
def test_build_then_reuse_the_snapshot(tmp_path, chunker):
    cfg = composed(f"ingest={chunker}", "ingest.chunk_size=120", "ingest.chunk_overlap=20")
    spec = ingest_spec(cfg.ingest, cfg.models.embedder.document)
    cold_store = InMemoryDocumentStore()
    cold = build_index(DOCS, spec, cold_store, tmp_path, "fp")
    assert not cold.cache_hit and cold.chunks > 4
    chunks = cold_store.filter_documents()
    texts = {d.id: d.content for d in DOCS}
    for chunk in chunks:
        start, end = chunk.meta["span"]
        assert chunk.id == f"{chunk.meta['doc_id']}#{start}-{end}"
        assert texts[chunk.meta["doc_id"]][start:end].strip() in chunk.content
        assert chunk.meta["tenant"] == {"en/a.md": "t1", "zh/b.md": "t2"}[chunk.meta["doc_id"]]
        assert len(chunk.embedding) == 384
    warm_store = InMemoryDocumentStore()
    warm = build_index(DOCS, spec, warm_store, tmp_path, "fp")
    assert warm.cache_hit and warm.chunks == cold.chunks
    restored = {d.id: d for d in warm_store.filter_documents()}
    for chunk in chunks:
        assert restored[chunk.id].meta == chunk.meta
        assert restored[chunk.id].embedding == pytest.approx(chunk.embedding, abs=1e-6)


def test_markdown_chunker_records_heading_paths(tmp_path):
    cfg = composed("ingest=markdown", "ingest.chunk_size=200", "ingest.chunk_overlap=0")
    store = InMemoryDocumentStore()
    build_index(DOCS, ingest_spec(cfg.ingest, cfg.models.embedder.document), store, tmp_path, "fp")
    paths = {tuple(d.meta["heading_path"]) for d in store.filter_documents()}
    assert ("Leave",) in paths and ("假期",) in paths

def test_an_unembedded_index_is_built_and_reloaded_without_vectors(tmp_path):
    cfg = composed("ingest.chunk_size=120", "ingest.chunk_overlap=0")
    spec = ingest_spec(cfg.ingest, None)
    assert "embedder" not in spec["components"]
    assert ["prefix.documents", "writer.documents"] in spec["connections"]
    cold = build_index(DOCS, spec, InMemoryDocumentStore(), tmp_path, "fp")
    manifest = json.loads((tmp_path / "fp" / MANIFEST).read_text())
    assert (manifest["chunks"], manifest["embeddings"]) == (cold.chunks, False)
    assert not (tmp_path / "fp" / "embeddings.npy").exists()
    warm_store = InMemoryDocumentStore()
    warm = build_index(DOCS, spec, warm_store, tmp_path, "fp")
    assert warm.cache_hit and warm.chunks == cold.chunks
    assert all(d.embedding is None for d in warm_store.filter_documents())
