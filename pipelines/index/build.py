"""Index building as a Haystack pipeline, cached on disk by fingerprint (`store=in_memory`).

A build runs under the fingerprint's lock (pipelines/index/locking.py) and ends in a snapshot
(pipelines/index/snapshot.py) that later runs with the same fingerprint read instead of ingesting again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from haystack import Document
from haystack.document_stores.types import DocumentStore, DuplicatePolicy

from components.retrievers.retrieval import stored_rows
from pipelines.builder import build_pipeline
from pipelines.index.backend import IndexInfo
from pipelines.index.locking import exclusive_build
from pipelines.index.snapshot import (
    MANIFEST,
    DamagedIndexError,
    discard,
    load_snapshot,
    map_snapshot,
    maps_snapshots,
    read_parents,
    save_snapshot,
)
from pipelines.index.update import document_hashes, plan_update

logger = logging.getLogger(__name__)
REUSE_BATCH = 10_000  # chunks an incremental build takes from its base per write
# Source documents ingested per pipeline run: their chunks' vectors are Python lists only until the store takes
# them, so ingestion's memory is bounded by a batch, not by the corpus. Every ingestion step works per document.
INGEST_BATCH = 500


def build_index(
    documents: list[Document],
    spec: Mapping[str, Any],
    store: DocumentStore,
    cache_dir: Path,
    fingerprint: str,
    lineage: str | None = None,
    update: bool = False,
    parents: DocumentStore | None = None,
) -> IndexInfo:
    """Fills `store` (and `parents`, with an index of parent blocks) from the cached snapshot when there is one,
    else runs ingestion and snapshots the result.

    Parallel sweep jobs wait on the fingerprint's lock for the first builder instead of re-embedding. A damaged
    snapshot is reported once, discarded and rebuilt. With `update`, a build starts from the newest snapshot of the
    same `lineage` and ingests only the documents that differ from it; the result is the snapshot a cold build of
    this corpus makes, under the same fingerprint.
    """
    start = time.perf_counter()
    path = cache_dir / fingerprint
    with exclusive_build(cache_dir, fingerprint):
        damage = None
        if (path / MANIFEST).exists():
            try:
                chunks = load_snapshot(path, store, parents=parents)
                return IndexInfo(fingerprint, path, True, chunks, time.perf_counter() - start)
            except DamagedIndexError as e:
                damage = str(e)
                logger.warning("index %s is damaged (%s); rebuilding", path, damage)
                discard(path)
        hashes = document_hashes(documents)
        plan = plan_update(cache_dir, lineage, hashes) if update and lineage else None
        if plan is not None:
            try:
                base = cache_dir / plan.base
                kept = map_snapshot(base)
                kept_parents = [p for p in read_parents(base) if p.meta.get("doc_id") in plan.reused]
            except DamagedIndexError as e:
                logger.warning("ingest.update: index %s is damaged (%s); building from scratch", plan.base, e)
                plan = None
            else:
                _write_reused(store, kept.documents, kept.embeddings, plan.reused)
                if parents is not None:
                    parents.write_documents(kept_parents, policy=DuplicatePolicy.OVERWRITE)
                documents = [doc for doc in documents if doc.id in plan.ingested]
                logger.info("updating index %s from %s: %s", fingerprint, plan.base, plan.counts())
        if documents:
            stores = {"store": store} | ({"parents": parents} if parents is not None else {})
            ingest = build_pipeline(spec, stores, key="ingest")
            ingest.warm_up()
            for begin in range(0, len(documents), INGEST_BATCH):
                ingest.run(documents=documents[begin : begin + INGEST_BATCH])
        rows = stored_rows(store)
        blocks = sorted(parents.filter_documents(), key=lambda block: block.id) if parents is not None else []
        manifest = {"fingerprint": fingerprint, "lineage": lineage, "documents": hashes}
        updated = {"updated_from": plan.base} if plan else {}
        save_snapshot(rows.documents, path, manifest | updated, blocks, rows.embeddings)
        if maps_snapshots(store):  # served as a cached build serves it; ingestion's copy is freed
            store.map_snapshot(map_snapshot(path))
    return IndexInfo(fingerprint, path, False, len(rows.documents), time.perf_counter() - start, damage, plan)


def _write_reused(
    store: DocumentStore, chunks: Sequence[Document], vectors: np.ndarray | None, reused: frozenset[str]
) -> None:
    """The chunks of `reused` documents with their vectors, a batch at a time: never all as Python lists."""
    for begin in range(0, len(chunks), REUSE_BATCH):
        batch = []
        for position in range(begin, min(begin + REUSE_BATCH, len(chunks))):
            chunk = chunks[position]
            if chunk.meta.get("doc_id") in reused:
                vector = None if vectors is None else vectors[position].tolist()
                batch.append(replace(chunk, embedding=vector))
        store.write_documents(batch, policy=DuplicatePolicy.OVERWRITE)


@dataclass(frozen=True)
class LocalSnapshots:
    """The IndexBackend of stores filled in this process (`store=in_memory`): an index is a snapshot in the cache."""

    kind: str  # the store kind, the only thing of the store that the fingerprint records
    server_side = False

    def identity(self, language: str) -> str:
        return self.kind

    build = staticmethod(build_index)

    def open(self, store: DocumentStore, index_dir: Path, parents: DocumentStore | None = None) -> IndexInfo:
        """The shipped snapshot, read into `store` (its parent blocks into `parents`) without recording a use: a
        bundle's files stay as registered."""
        start = time.perf_counter()
        chunks = load_snapshot(index_dir, store, record_use=False, parents=parents)
        return IndexInfo(index_dir.name, index_dir, True, chunks, time.perf_counter() - start)
