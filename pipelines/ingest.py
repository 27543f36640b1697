"""Index building as a Haystack pipeline, cached on disk by fingerprint.

The fingerprint covers corpus content, the ingestion config, the embedder identity and the store type, so sweep
jobs that share it reuse one index. Snapshots are written to a temporary folder and renamed into place, so a killed
run never leaves a half-written index that a later run trusts.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import json
import os
import shutil
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np
from haystack import Document
from haystack.document_stores.types import DocumentStore, DuplicatePolicy
from omegaconf import DictConfig, OmegaConf

from pipelines.builder import build_pipeline

INDEX_FORMAT = 1
MANIFEST = "manifest.json"
CHUNKS = "chunks.jsonl"
EMBEDDINGS = "embeddings.npy"
PROJECT_PACKAGES = {"components", "pipelines"}
# Settings that change how fast an index is built, not what it contains.
NOT_CONTENT = {"cache_dir", "progress_bar", "batch_size"}


@dataclass(frozen=True)
class IndexInfo:
    fingerprint: str
    path: Path
    cache_hit: bool
    chunks: int
    seconds: float


def ingest_spec(ingest: DictConfig, document_embedder: DictConfig) -> dict[str, Any]:
    """The ingestion graph: configured splitters in `ingest.chain`, then spans, heading prefix, embedding, write."""
    chain = list(ingest.chain)
    components: dict[str, Any] = {name: _plain(ingest.splitters[name]) for name in chain}
    components |= {
        "spans": {"_target_": "components.chunk_span_locator.ChunkSpanLocator"},
        "prefix": {"_target_": "components.heading_prefixer.HeadingPrefixer", "enabled": ingest.heading_prefix},
        "embedder": _plain(document_embedder),
        "writer": {
            "_target_": "haystack.components.writers.DocumentWriter",
            "document_store": "@store",
            "policy": "OVERWRITE",
        },
    }
    connections = [[f"{a}.documents", f"{b}.documents"] for a, b in zip(chain, chain[1:], strict=False)]
    connections += [
        [f"{chain[-1]}.documents", "spans.chunks"],
        ["spans.documents", "prefix.documents"],
        ["prefix.documents", "embedder.documents"],
        ["embedder.documents", "writer.documents"],
    ]
    return {
        "name": f"ingest-{ingest.name}",
        "components": components,
        "connections": connections,
        "inputs": {"documents": [f"{chain[0]}.documents", "spans.sources"]},
    }


def index_fingerprint(corpus_fingerprint: str, spec: Mapping[str, Any], embedder_identity: str, store_kind: str) -> str:
    content = {
        "format": INDEX_FORMAT,
        "haystack": version("haystack-ai"),
        "code": _project_code_digest(spec),
        "corpus": corpus_fingerprint,
        "spec": _content_only(spec),
        "embedder": embedder_identity,
        "store": store_kind,
    }
    return hashlib.sha256(json.dumps(content, sort_keys=True, default=str).encode()).hexdigest()[:20]


def _project_code_digest(spec: Mapping[str, Any]) -> str:
    """Our own ingestion components are code, not config: a change to them must not reuse an old index."""
    digest = hashlib.sha256()
    for target in sorted(str(c.get("_target_", "")) for c in spec["components"].values()):
        module = target.rpartition(".")[0]
        if module.split(".")[0] in PROJECT_PACKAGES:
            source = importlib.util.find_spec(module)
            digest.update(Path(source.origin).read_bytes() if source and source.origin else module.encode())
    return digest.hexdigest()[:16]


def _plain(config: DictConfig) -> dict[str, Any]:
    return OmegaConf.to_container(config, resolve=True)  # type: ignore[return-value]


def _content_only(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _content_only(v) for k, v in value.items() if k not in NOT_CONTENT and k != "model"}
    if isinstance(value, list):
        return [_content_only(v) for v in value]
    return value


def build_index(
    documents: list[Document],
    spec: Mapping[str, Any],
    store: DocumentStore,
    cache_dir: Path,
    fingerprint: str,
) -> IndexInfo:
    """Fills `store` from the cached snapshot when there is one, else runs ingestion and snapshots the result."""
    start = time.perf_counter()
    path = cache_dir / fingerprint
    cache_dir.mkdir(parents=True, exist_ok=True)
    with (cache_dir / f".{fingerprint}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # parallel sweep jobs wait for the first builder instead of re-embedding
        if (path / MANIFEST).exists():
            chunks = load_snapshot(path, store)
            return IndexInfo(fingerprint, path, True, chunks, time.perf_counter() - start)
        ingest = build_pipeline(spec, {"store": store}, key="ingest")
        ingest.warm_up()
        ingest.run(documents=documents)
        stored = store.filter_documents()
        save_snapshot(stored, path, {"fingerprint": fingerprint, "chunks": len(stored)})
    return IndexInfo(fingerprint, path, False, len(stored), time.perf_counter() - start)


def save_snapshot(documents: list[Document], path: Path, manifest: dict[str, Any]) -> None:
    """Writes chunks (JSONL) and embeddings (one float32 matrix) into a temp folder, then renames it into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}-", dir=path.parent))
    try:
        with (tmp / CHUNKS).open("w", encoding="utf-8") as f:
            for doc in documents:
                record = doc.to_dict(flatten=False)
                record.pop("embedding", None)
                f.write(json.dumps(record, ensure_ascii=False) + "\n")
        if documents and all(d.embedding is not None for d in documents):
            np.save(tmp / EMBEDDINGS, np.asarray([d.embedding for d in documents], dtype=np.float32))
        (tmp / MANIFEST).write_text(json.dumps(manifest | {"format": INDEX_FORMAT}, indent=2))
        if path.exists() and not (path / MANIFEST).exists():  # debris without a manifest is never trusted
            shutil.rmtree(path)
        try:
            os.rename(tmp, path)
        except OSError:  # a parallel job finished the same index first; theirs is identical
            if not (path / MANIFEST).exists():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def load_snapshot(path: Path, store: DocumentStore) -> int:
    with (path / CHUNKS).open(encoding="utf-8") as f:
        documents = [Document.from_dict(json.loads(line)) for line in f]
    if (path / EMBEDDINGS).exists():
        documents = [
            replace(doc, embedding=row.tolist())
            for doc, row in zip(documents, np.load(path / EMBEDDINGS), strict=True)
        ]
    store.write_documents(documents, policy=DuplicatePolicy.OVERWRITE)
    return len(documents)
