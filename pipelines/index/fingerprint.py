"""The index fingerprint names an index by what it contains: corpus content, the ingestion config, the code of our
own ingestion components, the embedder identity and the store, so sweep jobs that share it reuse one index.

Changing what it hashes invalidates every cached index (and every Weaviate collection): keep it stable.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
from collections.abc import Mapping
from functools import cache
from importlib.metadata import version
from pathlib import Path
from typing import Any

from pipelines.index.snapshot import INDEX_FORMAT
from pipelines.index.spec import DOCUMENT_EMBEDDER

PROJECT_PACKAGES = {"components", "pipelines"}
# Settings that change how fast an index is built (or how long a remote embedder is waited for), not what it contains.
NOT_CONTENT = {"cache_dir", "progress_bar", "batch_size", "timeout", "max_retries"}


def index_fingerprint(
    corpus_fingerprint: str | None, spec: Mapping[str, Any], embedder_identity: str, store_kind: str
) -> str:
    """Without a document embedder in `spec` the index holds no vectors, so `embedder_identity` does not count.

    With `corpus_fingerprint=None` it is the index's *lineage*: every index built the same way, whatever the corpus,
    shares it, so `ingest.update` can take an older one's chunks."""
    embeds = DOCUMENT_EMBEDDER in spec["components"]
    content = {
        "format": INDEX_FORMAT,
        "haystack": version("haystack-ai"),
        "code": _project_code_digest(spec),
        "corpus": corpus_fingerprint,
        "spec": _content_only(_without_embedder_model(spec)),
        "embedder": embedder_identity if embeds else None,
        "store": store_kind,
    }
    return hashlib.sha256(json.dumps(content, sort_keys=True, default=str).encode()).hexdigest()[:20]


def _project_code_digest(spec: Mapping[str, Any]) -> str:
    """Our own ingestion components are code, not config: a change to them must not reuse an old index.

    A component's module may name, in `INDEX_CODE`, other project modules whose code shapes its chunks; they count
    after it (a module without the list counts alone, as before the list existed)."""
    digest = hashlib.sha256()
    for target in sorted(str(c.get("_target_", "")) for c in spec["components"].values()):
        module = target.rpartition(".")[0]
        if module.split(".")[0] in PROJECT_PACKAGES:
            digest.update(_source(module))
            for name in _index_code(module):
                digest.update(_source(name))
    return digest.hexdigest()[:16]


def _source(module: str) -> bytes:
    """A module's source; a module that cannot be found counts by its name."""
    spec = importlib.util.find_spec(module)
    return Path(spec.origin).read_bytes() if spec and spec.origin else module.encode()


def _index_code(module: str) -> tuple[str, ...]:
    """The modules a component's module lists in `INDEX_CODE`; none when it cannot be found."""
    if importlib.util.find_spec(module) is None:
        return ()
    return tuple(getattr(importlib.import_module(module), "INDEX_CODE", ()))


def _without_embedder_model(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The document embedder's `model` is a machine-specific resolved path, fingerprinted as `embedder_identity`."""
    components = dict(spec["components"])
    if DOCUMENT_EMBEDDER in components:
        components[DOCUMENT_EMBEDDER] = {k: v for k, v in components[DOCUMENT_EMBEDDER].items() if k != "model"}
    return {**spec, "components": components}


def _content_only(value: Any, key: str | None = None) -> Any:
    if isinstance(value, Mapping):
        return {k: _content_only(v, k) for k, v in value.items() if k not in NOT_CONTENT}
    if isinstance(value, list):
        return [_content_only(v) for v in value]
    if key == "model" and isinstance(value, str):
        return _model_content(value)
    return value


def _model_content(ref: str) -> str:
    """A model that changes the index (e.g. a semantic splitter's), named by content rather than location.

    `model_identity` names local weights by absolute path plus modification times, which differ between
    machines and virtualenvs holding the same weights, so one cache would never be shared. Here a Hugging Face
    snapshot folder is named by its revision (the hub's own content address) and any other local file or folder
    by a SHA-256 of its files' names and bytes (read once per process while unchanged). A reference that is not
    a local path (a hub id, an API model name) is its own identity.
    """
    path = Path(os.path.abspath(Path(ref).expanduser()))  # not resolve(): hub files are symlinks into blobs/
    if not path.exists():
        return ref
    parts = path.parts
    for i in range(1, len(parts) - 1):
        if parts[i] == "snapshots" and parts[i - 1].startswith("models--"):
            repo = parts[i - 1].removeprefix("models--").replace("--", "/")
            return f"hf:{repo}@{'/'.join(parts[i + 1 :])}"
    return f"sha256:{_content_digest(path)}"


def _content_digest(path: Path) -> str:
    base = path if path.is_dir() else path.parent
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    return _digest(tuple((f.relative_to(base).as_posix(), str(f), f.stat().st_size, f.stat().st_mtime_ns) for f in files))


@cache
def _digest(files: tuple[tuple[str, str, int, int], ...]) -> str:
    """Of names and bytes; paths, sizes and mtimes only key the cache, so unchanged weights are read once."""
    digest = hashlib.sha256()
    for name, file, _, _ in files:
        digest.update(f"{name}\n".encode())
        with open(file, "rb") as f:
            while block := f.read(1 << 20):
                digest.update(block)
    return digest.hexdigest()[:20]
