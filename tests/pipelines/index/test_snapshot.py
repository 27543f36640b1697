"""Snapshots: written atomically, never trusted unfinished, and a damaged one is reported and rebuilt."""

import json
import logging

import numpy as np
import pytest
from haystack import Document
from haystack.document_stores.in_memory import InMemoryDocumentStore

from pipelines.index import build_index, ingest_spec
from pipelines.index.snapshot import MANIFEST, MARKER, PARENTS, save_snapshot
from tests.support.index_builds import clean_build, fast_spec
from tests.support.ingest_corpus import DOCS, chunk_records
from tests.support.shipped import composed


def test_an_unfinished_snapshot_is_never_trusted(tmp_path):
    (tmp_path / "fp").mkdir()  # a killed run left a folder without its manifest
    (tmp_path / "fp" / MARKER).touch()  # ragtune's, so it may be discarded (tests/adversarial: a user's may not)
    (tmp_path / "fp" / "chunks.jsonl").write_text("garbage")
    cfg = composed("ingest.chunk_size=120", "ingest.chunk_overlap=0")
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
    with caplog.at_level(logging.WARNING, logger="pipelines.index.build"):
        info = build_index(DOCS, spec, store, cache, "fp")
    assert (info.cache_hit, info.rebuilt_reason) == (False, reason)
    assert [r.getMessage() for r in caplog.records] == [f"index {cache / 'fp'} is damaged ({reason}); rebuilding"]
    assert chunk_records(store) == expected
    again = build_index(DOCS, spec, InMemoryDocumentStore(), cache, "fp")
    assert (again.cache_hit, again.rebuilt_reason, again.chunks) == (True, None, len(expected))


PARENT_CHILD = ("ingest=parent_child", "ingest.parent_size=400")


def block_records(store):
    return sorted((d.to_dict() for d in store.filter_documents()), key=lambda r: r["id"])


def test_parent_blocks_round_trip_through_the_snapshot_beside_the_chunks(tmp_path):
    spec = fast_spec(None, *PARENT_CHILD)
    store, parents = InMemoryDocumentStore(), InMemoryDocumentStore()
    cold = build_index(DOCS, spec, store, tmp_path, "fp", parents=parents)
    manifest = json.loads((tmp_path / "fp" / MANIFEST).read_text())
    assert parents.count_documents() > 2 and manifest["parents"] == parents.count_documents()
    assert not {d.id for d in parents.filter_documents()} & {d.id for d in store.filter_documents()}
    assert all(d.embedding is None for d in parents.filter_documents())  # never embedded, never searched

    warm_store, warm_parents = InMemoryDocumentStore(), InMemoryDocumentStore()
    warm = build_index(DOCS, spec, warm_store, tmp_path, "fp", parents=warm_parents)
    assert (cold.cache_hit, warm.cache_hit) == (False, True)
    assert chunk_records(warm_store) == chunk_records(store)
    assert block_records(warm_parents) == block_records(parents)


def test_an_index_without_parents_keeps_the_old_format_and_loads_into_an_empty_parent_store(tmp_path):
    spec = fast_spec()
    build_index(DOCS, spec, InMemoryDocumentStore(), tmp_path, "fp", parents=InMemoryDocumentStore())
    assert "parents" not in json.loads((tmp_path / "fp" / MANIFEST).read_text())
    assert not (tmp_path / "fp" / PARENTS).exists()
    parents = InMemoryDocumentStore()
    assert build_index(DOCS, spec, InMemoryDocumentStore(), tmp_path, "fp", parents=parents).cache_hit
    assert parents.count_documents() == 0


def drop_last_parent(path):
    lines = (path / PARENTS).read_text(encoding="utf-8").splitlines(keepends=True)
    (path / PARENTS).write_text("".join(lines[:-1]), encoding="utf-8")


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (lambda p: (p / PARENTS).unlink(), "parents.jsonl is missing"),
        (drop_last_parent, "parents.jsonl has {n_less} parents, the manifest records {n}"),
    ],
)
def test_damaged_parent_blocks_are_reported_and_rebuilt(tmp_path, damage, reason):
    spec = fast_spec(None, *PARENT_CHILD)
    parents = InMemoryDocumentStore()
    build_index(DOCS, spec, InMemoryDocumentStore(), tmp_path, "fp", parents=parents)
    expected = block_records(parents)
    damage(tmp_path / "fp")
    rebuilt = InMemoryDocumentStore()
    info = build_index(DOCS, spec, InMemoryDocumentStore(), tmp_path, "fp", parents=rebuilt)
    assert (info.cache_hit, info.rebuilt_reason) == (False, reason.format(n=len(expected), n_less=len(expected) - 1))
    assert block_records(rebuilt) == expected
