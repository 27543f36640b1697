"""Index building as a Haystack pipeline, cached on disk by fingerprint.

The fingerprint covers corpus content, the ingestion config, the embedder identity and the store type, so sweep
jobs that share it reuse one index. Snapshots are written to a temporary folder and renamed into place, so a killed
run never leaves a half-written index that a later run trusts; what a killed run does leave (its temporary folder,
its lock file) is removed by the next build, and a snapshot damaged after the fact is detected and rebuilt.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import json
import logging
import os
import re
import shutil
import stat
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import cache
from importlib.metadata import version
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np
from haystack import Document
from haystack.document_stores.types import DocumentStore, DuplicatePolicy
from omegaconf import DictConfig, OmegaConf

from pipelines.builder import build_pipeline
from pipelines.errors import UserError

logger = logging.getLogger(__name__)

# 2: the manifest records chunk count, embeddings and creation time, which loading checks the files against.
INDEX_FORMAT = 2
MANIFEST = "manifest.json"
CHUNKS = "chunks.jsonl"
EMBEDDINGS = "embeddings.npy"
# Touched on every load: `ragtune cache` prunes by last use.
LAST_USED = "last_used"
# Written first into every snapshot's temp folder, so the snapshot bears it too: the folders ragtune may delete.
MARKER = ".ragtune-index"
MANIFEST_FIELDS = {"chunks": int, "embeddings": bool, "created": float}
PROJECT_PACKAGES = {"components", "pipelines"}
# The ingestion component that embeds chunks; its model is fingerprinted as `embedder_identity`.
DOCUMENT_EMBEDDER = "embedder"
# Settings that change how fast an index is built, not what it contains.
NOT_CONTENT = {"cache_dir", "progress_bar", "batch_size"}
# save_snapshot's temp folders: `.<fingerprint>-<writer pid>-<mkdtemp suffix>`; older ones lack the pid.
TEMP_FOLDER = re.compile(r"\.(?P<fingerprint>.+?)-(?:(?P<pid>\d+)-)?[a-z0-9_]{8}")
# Writing a snapshot takes seconds; a temp folder this old is debris even if its pid was reused since.
STALE_AFTER_SECONDS = 6 * 3600


class DamagedIndexError(ValueError):
    """A snapshot whose files disagree with its manifest; the message says which file and how."""


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


@dataclass(frozen=True)
class UpdatePlan:
    """What an incremental build takes from `base`: the chunks of documents whose content and metadata are
    unchanged; the rest (new or changed) is ingested again, and chunks of documents gone from the corpus are dropped."""

    base: str
    reused: frozenset[str]
    ingested: frozenset[str]
    removed: frozenset[str]

    def counts(self) -> dict[str, int]:
        return {"reused_documents": len(self.reused), "ingested_documents": len(self.ingested),
                "removed_documents": len(self.removed)}


def ingest_spec(ingest: DictConfig, document_embedder: DictConfig | None) -> dict[str, Any]:
    """The ingestion graph: configured splitters in `ingest.chain`, then spans, heading prefix, embedding, write.

    `document_embedder=None` leaves embedding out, for query pipelines that read no vectors (BM25 only): the
    snapshot then has no embeddings, and its fingerprint differs from the embedded index's.
    """
    chain = list(ingest.chain)
    components: dict[str, Any] = {name: _plain(ingest.splitters[name]) for name in chain}
    components |= {
        "spans": {"_target_": "components.preprocessors.chunk_span_locator.ChunkSpanLocator"},
        "prefix": {"_target_": "components.preprocessors.heading_prefixer.HeadingPrefixer", "enabled": ingest.heading_prefix},
    }
    if document_embedder is not None:
        components[DOCUMENT_EMBEDDER] = _plain(document_embedder)
    components["writer"] = {
        "_target_": "haystack.components.writers.DocumentWriter",
        "document_store": "@store",
        "policy": "OVERWRITE",
    }
    after_spans = list(components)[len(chain) :]
    connections = [[f"{a}.documents", f"{b}.documents"] for a, b in pairwise(chain)]
    connections.append([f"{chain[-1]}.documents", "spans.chunks"])
    connections += [[f"{a}.documents", f"{b}.documents"] for a, b in pairwise(after_spans)]
    return {
        "name": f"ingest-{ingest.name}",
        "components": components,
        "connections": connections,
        "inputs": {"documents": [f"{chain[0]}.documents", "spans.sources"]},
    }


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


def build_index(
    documents: list[Document],
    spec: Mapping[str, Any],
    store: DocumentStore,
    cache_dir: Path,
    fingerprint: str,
    lineage: str | None = None,
    update: bool = False,
) -> IndexInfo:
    """Fills `store` from the cached snapshot when there is one, else runs ingestion and snapshots the result.

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
                chunks = load_snapshot(path, store)
                return IndexInfo(fingerprint, path, True, chunks, time.perf_counter() - start)
            except DamagedIndexError as e:
                damage = str(e)
                logger.warning("index %s is damaged (%s); rebuilding", path, damage)
                discard(path)
        hashes = document_hashes(documents)
        plan = plan_update(cache_dir, lineage, hashes) if update and lineage else None
        if plan is not None:
            try:
                kept = [c for c in read_snapshot(cache_dir / plan.base) if c.meta.get("doc_id") in plan.reused]
            except DamagedIndexError as e:
                logger.warning("ingest.update: index %s is damaged (%s); building from scratch", plan.base, e)
                plan = None
            else:
                store.write_documents(kept, policy=DuplicatePolicy.OVERWRITE)
                documents = [doc for doc in documents if doc.id in plan.ingested]
                logger.info("updating index %s from %s: %s", fingerprint, plan.base, plan.counts())
        if documents:
            ingest = build_pipeline(spec, {"store": store}, key="ingest")
            ingest.warm_up()
            ingest.run(documents=documents)
        stored = sorted(store.filter_documents(), key=lambda chunk: chunk.id)
        manifest = {"fingerprint": fingerprint, "lineage": lineage, "documents": hashes}
        save_snapshot(stored, path, manifest | ({"updated_from": plan.base} if plan else {}))
    return IndexInfo(fingerprint, path, False, len(stored), time.perf_counter() - start, damage, plan)


def document_hashes(documents: list[Document]) -> dict[str, str]:
    """Per source document, a digest of what its chunks are made of: its content and its metadata."""
    return {
        doc.id: hashlib.sha256(
            json.dumps([doc.content, doc.meta], sort_keys=True, ensure_ascii=False, default=str).encode()
        ).hexdigest()[:20]
        for doc in documents
    }


def plan_update(cache_dir: Path, lineage: str, hashes: Mapping[str, str]) -> UpdatePlan | None:
    """Against the newest intact snapshot of `lineage`; None when there is none (the build is then a cold one)."""
    candidates = []
    for manifest_file in cache_dir.glob(f"*/{MANIFEST}"):
        try:
            manifest = read_manifest(manifest_file.parent)
        except DamagedIndexError:
            continue
        if manifest.get("lineage") == lineage and isinstance(manifest.get("documents"), dict):
            candidates.append((manifest["created"], manifest_file.parent.name, manifest["documents"]))
    if not candidates:
        logger.info("ingest.update: no earlier index of this lineage in %s; building from scratch", cache_dir)
        return None
    _, base, before = max(candidates)
    reused = frozenset(doc_id for doc_id, digest in hashes.items() if before.get(doc_id) == digest)
    return UpdatePlan(base, reused, frozenset(hashes) - reused, frozenset(before) - frozenset(hashes))


@contextmanager
def exclusive_build(cache_dir: Path, fingerprint: str) -> Iterator[None]:
    """One builder per fingerprint across processes, after clearing what killed builds left in `cache_dir`."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    remove_stale(cache_dir)
    with build_lock(cache_dir, fingerprint):
        yield


@contextmanager
def build_lock(cache_dir: Path, fingerprint: str, blocking: bool = True) -> Iterator[bool]:
    """Holds the fingerprint's lock; yields False at once when not `blocking` and another process holds it.

    The lock file is removed on release while still held, so finished builds leave none behind.
    """
    path = cache_dir / f".{fingerprint}.lock"
    fd = _locked_fd(path, blocking)
    if fd is None:
        yield False
        return
    try:
        yield True
    finally:
        path.unlink(missing_ok=True)
        os.close(fd)


def _locked_fd(path: Path, blocking: bool) -> int | None:
    """An flock on the file now at `path`; None when not `blocking` and it is held elsewhere.

    A lock won on a file that its holder unlinked meanwhile guards nothing (the next process creates a new file),
    so then it retries on the file that is there now.
    """
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if blocking else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        except BaseException:
            os.close(fd)
            raise
        if _is_file_at(fd, path):
            return fd
        os.close(fd)


def _is_file_at(fd: int, path: Path) -> bool:
    try:
        there = path.stat()
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (held.st_dev, held.st_ino) == (there.st_dev, there.st_ino)


def remove_stale(cache_dir: Path) -> None:
    """Removes what killed builds leave behind: temp folders no live process writes, lock files nobody holds
    (empty regular files, as build_lock leaves them; a symlink or a file with content is not ours)."""
    for folder in stale_temp_folders(cache_dir):
        shutil.rmtree(folder, ignore_errors=True)
    for lock in cache_dir.glob(".*.lock"):
        if not _is_empty_file(lock):
            continue
        with build_lock(cache_dir, lock.name[1 : -len(".lock")], blocking=False):
            pass  # held elsewhere: left alone; free: taken, and so unlinked on release


def _is_empty_file(path: Path) -> bool:
    try:
        info = path.lstat()
    except FileNotFoundError:  # released meanwhile
        return False
    return stat.S_ISREG(info.st_mode) and info.st_size == 0


def stale_temp_folders(cache_dir: Path) -> list[Path]:
    """Snapshot temp folders whose writer is gone: its pid (in the name) is dead, or the folder is hours old.

    Only folders that ragtune wrote: a folder that merely looks like one by name is left alone.
    """
    stale = []
    for folder in cache_dir.glob(".*"):
        match = TEMP_FOLDER.fullmatch(folder.name)
        if match and written_by_ragtune(folder, match["fingerprint"]) and _is_stale(folder, match["pid"]):
            stale.append(folder)
    return stale


def discard(path: Path) -> None:
    """Removes the snapshot folder `path` before it is rebuilt, only if ragtune wrote it: a folder of someone
    else's that happens to bear a fingerprint's name in the cache is reported, never deleted."""
    if not written_by_ragtune(path, path.name):
        raise UserError(f"index cache: {path} was not written by ragtune (no {MARKER}, no ragtune manifest) and "
                        f"stands where index {path.name} goes; move it out of {path.parent}")
    shutil.rmtree(path)


def written_by_ragtune(folder: Path, fingerprint: str) -> bool:
    """Whether `folder` (a real folder, never a symlink) is a snapshot or temp folder of `fingerprint` that ragtune
    wrote: it bears MARKER, or (written before the marker existed) its manifest is ragtune's for `fingerprint`."""
    if folder.is_symlink() or not folder.is_dir():
        return False
    marker = folder / MARKER
    if marker.is_file() and not marker.is_symlink():
        return True
    manifest = folder / MANIFEST
    if manifest.is_symlink() or not manifest.is_file():
        return False
    try:
        content = json.loads(manifest.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        return False
    return isinstance(content, dict) and content.get("format") == INDEX_FORMAT and content.get("fingerprint") == fingerprint


def _is_stale(folder: Path, pid: str | None) -> bool:
    try:
        age = time.time() - folder.stat().st_mtime
    except FileNotFoundError:  # another build's sweep removed it first
        return False
    return age > STALE_AFTER_SECONDS or (pid is not None and not _is_alive(int(pid)))


def _is_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def save_snapshot(documents: list[Document], path: Path, manifest: dict[str, Any]) -> None:
    """Writes chunks (JSONL) and embeddings (one float32 matrix) into a temp folder, then renames it into place.

    The manifest records what the files must hold (chunk count, whether there are embeddings) so that loading
    can tell a damaged snapshot from a good one.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}-{os.getpid()}-", dir=path.parent))
    try:
        (tmp / MARKER).touch()  # first: a killed write leaves a folder that `remove_stale` knows is ragtune's
        with (tmp / CHUNKS).open("w", encoding="utf-8") as f:
            for doc in documents:
                record = doc.to_dict(flatten=False)
                record.pop("embedding", None)
                f.write(json.dumps(record, ensure_ascii=False) + "\n")
        embeds = bool(documents) and all(d.embedding is not None for d in documents)
        if embeds:
            np.save(tmp / EMBEDDINGS, np.asarray([d.embedding for d in documents], dtype=np.float32))
        facts = {"chunks": len(documents), "embeddings": embeds, "created": time.time(), "format": INDEX_FORMAT}
        (tmp / MANIFEST).write_text(json.dumps(manifest | facts, indent=2))
        if path.exists() and not (path / MANIFEST).exists():  # debris without a manifest is never trusted
            discard(path)
        try:
            os.rename(tmp, path)
        except OSError:  # a parallel job finished the same index first; theirs is identical
            if not (path / MANIFEST).exists():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def load_snapshot(path: Path, store: DocumentStore, record_use: bool = True) -> int:
    """Writes the snapshot into `store` only once all of it has been read and checked; records the use in the
    index cache (`record_use`), never in a promoted bundle, whose files stay as registered."""
    documents = read_snapshot(path)
    store.write_documents(documents, policy=DuplicatePolicy.OVERWRITE)
    if record_use:
        (path / LAST_USED).touch()
    return len(documents)


def read_snapshot(path: Path) -> list[Document]:
    """The snapshot's chunks with their embeddings; DamagedIndexError when a file disagrees with the manifest."""
    manifest = read_manifest(path)
    documents = read_chunks(path)
    if len(documents) != manifest["chunks"]:
        raise DamagedIndexError(f"{CHUNKS} has {len(documents)} chunks, the manifest records {manifest['chunks']}")
    if not manifest["embeddings"]:
        return documents
    embeddings = _read_embeddings(path / EMBEDDINGS)
    if len(embeddings) != len(documents):
        raise DamagedIndexError(f"{EMBEDDINGS} has {len(embeddings)} rows for {len(documents)} chunks")
    return [replace(doc, embedding=row.tolist()) for doc, row in zip(documents, embeddings, strict=True)]


def read_manifest(path: Path) -> dict[str, Any]:
    """The snapshot's manifest; DamagedIndexError when it is missing, unparsable or lacks a field loading needs."""
    try:
        manifest = json.loads((path / MANIFEST).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DamagedIndexError(f"{MANIFEST} is missing") from None
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise DamagedIndexError(f"{MANIFEST} is not valid JSON") from None
    for key, kind in MANIFEST_FIELDS.items():
        if not isinstance(manifest, dict) or not isinstance(manifest.get(key), kind):
            raise DamagedIndexError(f"{MANIFEST} has no valid '{key}'")
    return manifest


def read_chunks(path: Path) -> list[Document]:
    """The snapshot's chunks without their embeddings."""
    file = path / CHUNKS
    if not file.exists():
        raise DamagedIndexError(f"{CHUNKS} is missing")
    documents = []
    try:
        with file.open(encoding="utf-8") as f:
            for number, line in enumerate(f, start=1):
                try:
                    documents.append(Document.from_dict(json.loads(line)))
                except (ValueError, TypeError, KeyError, AttributeError):  # JSONDecodeError is a ValueError
                    raise DamagedIndexError(f"{CHUNKS} line {number} is not a valid chunk") from None
    except UnicodeDecodeError:
        raise DamagedIndexError(f"{CHUNKS} is not valid UTF-8") from None
    return documents


def _read_embeddings(file: Path) -> np.ndarray:
    if not file.exists():
        raise DamagedIndexError(f"the manifest records embeddings but {EMBEDDINGS} is missing")
    try:
        embeddings = np.load(file)
    except (ValueError, OSError, EOFError) as e:
        raise DamagedIndexError(f"{EMBEDDINGS} is unreadable: {e}") from None
    if embeddings.ndim != 2:
        raise DamagedIndexError(f"{EMBEDDINGS} is not a matrix (shape {embeddings.shape})")
    return embeddings
