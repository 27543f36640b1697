"""The index: a corpus ingested into chunks (and vectors) once per fingerprint and reused by every run that shares it.

    spec = ingest_spec(cfg.ingest, cfg.models.embedder.document)
    fingerprint = index_fingerprint(dataset.corpus_fingerprint, spec, embedder_identity, backend.identity(language))
    info = backend.build(dataset.documents, spec, store, cache_dir, fingerprint)  # an IndexInfo

experiments/runs/indexed.py does this for every run. One job per module:

- `spec`: the ingestion graph (`ingest.*` and the document embedder) as a pipeline spec;
- `fingerprint`: what names an index; changing what it hashes invalidates every user's cache;
- `backend`: `IndexBackend`, what a run needs from an index wherever it lives, and `IndexInfo`, what it reports;
- `build`: `build_index` and `LocalSnapshots`, the backend of `store=in_memory`;
- `weaviate`: `WeaviateCollections`, the backend of `store=weaviate`, and the store's factory;
- `snapshot`: the snapshot format (manifest, chunks, embeddings, ragtune's marker, temp folders);
- `records`: chunks as JSON records in one buffer, decoded only when one is read;
- `compact_store`: `CompactDocumentStore`, the store of `store=in_memory`: records and one vector matrix, mapped
  from the snapshot;
- `locking`: one builder per fingerprint across processes;
- `update`: `ingest.update`, an incremental build from an earlier snapshot of the same lineage.
"""

from pipelines.index.backend import IndexBackend, IndexInfo
from pipelines.index.build import LocalSnapshots, build_index
from pipelines.index.fingerprint import index_fingerprint
from pipelines.index.snapshot import DamagedIndexError
from pipelines.index.spec import ingest_spec
from pipelines.index.weaviate import WeaviateCollections

__all__ = [
    "DamagedIndexError",
    "IndexBackend",
    "IndexInfo",
    "LocalSnapshots",
    "WeaviateCollections",
    "build_index",
    "index_fingerprint",
    "ingest_spec",
]
