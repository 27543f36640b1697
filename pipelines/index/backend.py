"""What a run needs from an index wherever it lives: `LocalSnapshots` (pipelines/index/build.py) keeps it as a
snapshot in the index cache, read into an in-memory store; `WeaviateCollections` (pipelines/index/weaviate.py)
keeps it as a collection on the server. experiments/runs/indexed.py picks one per `store.kind` and asks it only."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from haystack import Document
from haystack.document_stores.types import DocumentStore

from pipelines.index.update import UpdatePlan


@dataclass(frozen=True)
class IndexInfo:
    fingerprint: str
    path: Path  # the snapshot folder; for a server-side store, the collection's name
    cache_hit: bool
    chunks: int
    seconds: float
    # Why the cached snapshot was discarded and rebuilt (it was damaged); None when there was none to discard.
    rebuilt_reason: str | None = None
    # `ingest.update`: the snapshot it started from and how many documents were reused, embedded and removed.
    update: UpdatePlan | None = None


class IndexBackend(Protocol):
    """Where an index lives, how it is built once per fingerprint and how a promoted run's index is opened."""

    @property
    def server_side(self) -> bool:
        """Whether the chunks stay on a server: never snapshotted here, never read back whole."""
        ...

    def identity(self, language: str) -> str:
        """What of the store changes the index's content (it enters the fingerprint), for a corpus in `language`."""
        ...

    def build(
        self,
        documents: list[Document],
        spec: Mapping[str, Any],
        store: DocumentStore,
        cache_dir: Path,
        fingerprint: str,
        lineage: str | None = None,
        update: bool = False,
        parents: DocumentStore | None = None,
    ) -> IndexInfo:
        """Fills `store` with index `fingerprint`: the cached one when it is whole, else built by `spec`; an index
        with parent blocks (`ingest.parents`) puts them in `parents`."""
        ...

    def open(self, store: DocumentStore, index_dir: Path, parents: DocumentStore | None = None) -> IndexInfo:
        """A promoted run's index, from what its bundle ships in `index_dir` (its parent blocks into `parents`);
        only read, never rebuilt."""
        ...
