"""Index building as a Haystack pipeline, cached on disk by fingerprint (`store=in_memory`).

A build runs under the fingerprint's lock (pipelines/index/locking.py) and ends in a snapshot
(pipelines/index/snapshot.py) that later runs with the same fingerprint read instead of ingesting again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from haystack import Document
from haystack.document_stores.types import DocumentStore, DuplicatePolicy

from pipelines.builder import build_pipeline
from pipelines.index.backend import IndexInfo
from pipelines.index.locking import exclusive_build
from pipelines.index.snapshot import (
    MANIFEST,
    DamagedIndexError,
    discard,
    load_snapshot,
    read_parents,
    read_snapshot,
    save_snapshot,
)
from pipelines.index.update import document_hashes, plan_update

logger = logging.getLogger(__name__)


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
                kept = [c for c in read_snapshot(base) if c.meta.get("doc_id") in plan.reused]
                kept_parents = [p for p in read_parents(base) if p.meta.get("doc_id") in plan.reused]
            except DamagedIndexError as e:
                logger.warning("ingest.update: index %s is damaged (%s); building from scratch", plan.base, e)
                plan = None
            else:
                store.write_documents(kept, policy=DuplicatePolicy.OVERWRITE)
                if parents is not None:
                    parents.write_documents(kept_parents, policy=DuplicatePolicy.OVERWRITE)
                documents = [doc for doc in documents if doc.id in plan.ingested]
                logger.info("updating index %s from %s: %s", fingerprint, plan.base, plan.counts())
        if documents:
            stores = {"store": store} | ({"parents": parents} if parents is not None else {})
            ingest = build_pipeline(spec, stores, key="ingest")
            ingest.warm_up()
            ingest.run(documents=documents)
        stored = sorted(store.filter_documents(), key=lambda chunk: chunk.id)
        blocks = sorted(parents.filter_documents(), key=lambda block: block.id) if parents is not None else []
        manifest = {"fingerprint": fingerprint, "lineage": lineage, "documents": hashes}
        save_snapshot(stored, path, manifest | ({"updated_from": plan.base} if plan else {}), blocks)
    return IndexInfo(fingerprint, path, False, len(stored), time.perf_counter() - start, damage, plan)


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
