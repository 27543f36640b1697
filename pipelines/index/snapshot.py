"""The snapshot format: one folder per index fingerprint in the index cache, holding `manifest.json`,
`chunks.jsonl` (chunks without vectors, in id order), `embeddings.npy` (one float32 matrix, a row per chunk),
ragtune's marker and, for an index with parent blocks (`ingest.parents`), `parents.jsonl`.

A store that maps snapshots (pipelines/index/compact_store.py) serves both files in place (`map_snapshot`);
any other Haystack store is written the chunks with their vectors.

Snapshots are written to a temporary folder and renamed into place, so a killed run never leaves a half-written
index that a later run trusts; a snapshot damaged after the fact fails to load with DamagedIndexError. Only
folders that ragtune wrote (its marker, or its manifest) are ever deleted.
"""

from __future__ import annotations

import json
import mmap
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np
from haystack import Document
from haystack.document_stores.types import DocumentStore, DuplicatePolicy

from components.retrievers.document_masks import ACCESS_FIELDS, record_value
from pipelines.errors import UserError
from pipelines.index.records import RecordDocuments, record_of
from pipelines.processes import alive

# 2: the manifest records chunk count, embeddings and creation time, which loading checks the files against.
INDEX_FORMAT = 2
MANIFEST = "manifest.json"
CHUNKS = "chunks.jsonl"
EMBEDDINGS = "embeddings.npy"
# The parent blocks, written only when there are some: the manifest then records how many (`parents`).
PARENTS = "parents.jsonl"
# Touched on every load: `ragtune cache` prunes by last use.
LAST_USED = "last_used"
# Written first into every snapshot's temp folder, so the snapshot bears it too: the folders ragtune may delete.
MARKER = ".ragtune-index"
MANIFEST_FIELDS = {"chunks": int, "embeddings": bool, "created": float}
# save_snapshot's temp folders: `.<fingerprint>-<writer pid>-<mkdtemp suffix>`; older ones lack the pid.
TEMP_FOLDER = re.compile(r"\.(?P<fingerprint>.+?)-(?:(?P<pid>\d+)-)?[a-z0-9_]{8}")
# Writing a snapshot takes seconds; a temp folder this old is debris even if its pid was reused since.
STALE_AFTER_SECONDS = 6 * 3600


class DamagedIndexError(ValueError):
    """A snapshot whose files disagree with its manifest; the message says which file and how."""


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
    return age > STALE_AFTER_SECONDS or (pid is not None and not alive(int(pid)))


def save_snapshot(
    documents: Sequence[Document],
    path: Path,
    manifest: dict[str, Any],
    parents: Sequence[Document] = (),
    embeddings: np.ndarray | None = None,
) -> None:
    """Writes chunks (JSONL, in id order), embeddings (one float32 matrix: `embeddings`, aligned with
    `documents`, else the documents' own vectors) and any `parents` (JSONL) into a temp folder, then renames it
    into place.

    The manifest records what the files must hold (chunk count, whether there are embeddings, the parent count
    when there are parents) so that loading can tell a damaged snapshot from a good one.
    """
    # A store's own rows (RecordDocuments) are in id order already and written as they are held.
    in_order = isinstance(documents, RecordDocuments)
    order = list(range(len(documents))) if in_order else sorted(range(len(documents)), key=lambda i: documents[i].id)
    if embeddings is None and documents and all(d.embedding is not None for d in documents):
        embeddings = np.asarray([d.embedding for d in documents], dtype=np.float32)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}-{os.getpid()}-", dir=path.parent))
    try:
        (tmp / MARKER).touch()  # first: a killed write leaves a folder that `remove_stale` knows is ragtune's
        if isinstance(documents, RecordDocuments):
            _write_records(tmp / CHUNKS, documents.records())
        else:
            _write_records(tmp / CHUNKS, (record_of(documents[i]) for i in order))
        if parents:
            _write_records(tmp / PARENTS, (record_of(block) for block in parents))
        embeds = embeddings is not None and len(embeddings) > 0
        if embeds:
            ordered = embeddings if in_order or order == sorted(order) else embeddings[order]
            np.save(tmp / EMBEDDINGS, np.asarray(ordered, dtype=np.float32))
        facts = {"chunks": len(documents), "embeddings": embeds, "created": time.time(), "format": INDEX_FORMAT}
        facts |= {"parents": len(parents)} if parents else {}
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


def _write_records(file: Path, records: Iterable[bytes]) -> None:
    with file.open("wb") as f:
        for record in records:
            f.write(record + b"\n")


def load_snapshot(
    path: Path, store: DocumentStore, record_use: bool = True, parents: DocumentStore | None = None
) -> int:
    """Fills `store` from the snapshot, and `parents` with its parent blocks, only once all of it has been read
    and checked: a store that maps snapshots (CompactDocumentStore) maps its files, any other is written the
    chunks with their vectors. Records the use in the index cache (`record_use`), never in a promoted bundle,
    whose files stay as registered."""
    if maps_snapshots(store):
        mapped = map_snapshot(path)
        blocks = read_parents(path)
        store.map_snapshot(mapped)
        count = len(mapped.documents)
    else:
        chunks = read_snapshot(path)
        blocks = read_parents(path)
        store.write_documents(chunks, policy=DuplicatePolicy.OVERWRITE)
        count = len(chunks)
    if parents is not None:
        parents.write_documents(blocks, policy=DuplicatePolicy.OVERWRITE)
    if record_use:
        (path / LAST_USED).touch()
    return count


def maps_snapshots(store: DocumentStore) -> bool:
    """Whether `store` serves a snapshot's files in place (CompactDocumentStore) rather than being written them."""
    return callable(getattr(store, "map_snapshot", None))


@dataclass(frozen=True)
class MappedSnapshot:
    """A snapshot served in place: its chunks decoded from the mapped `chunks.jsonl` on access, its matrix mapped
    read-only (None without embeddings), and each chunk's value of every ACCESS_FIELDS field, read while checking
    the file, so that scoping masks need no second pass."""

    documents: RecordDocuments
    embeddings: np.ndarray | None
    access: dict[str, list[Any]]


def map_snapshot(path: Path) -> MappedSnapshot:
    """Every line is parsed once here, so a damaged file fails now, not mid-query."""
    manifest = read_manifest(path)
    file = path / CHUNKS
    if not file.exists():
        raise DamagedIndexError(f"{CHUNKS} is missing")
    documents = RecordDocuments.of(_mapped_bytes(file))
    if len(documents) != manifest["chunks"]:
        raise DamagedIndexError(f"{CHUNKS} has {len(documents)} chunks, the manifest records {manifest['chunks']}")
    access: dict[str, list[Any]] = {field: [] for field in ACCESS_FIELDS}
    previous = None
    for number, line in enumerate(documents.records(), start=1):
        try:
            record = json.loads(line)
            doc_id = record["id"]
        except (ValueError, TypeError, KeyError):  # JSONDecodeError and UnicodeDecodeError are ValueErrors
            raise DamagedIndexError(f"{CHUNKS} line {number} is not a valid chunk") from None
        if previous is not None and not previous < doc_id:
            raise DamagedIndexError(f"{CHUNKS} line {number} is out of id order")
        previous = doc_id
        for field, values in access.items():
            values.append(record_value(record, field))
    embeddings = None
    if manifest["embeddings"]:
        embeddings = _read_embeddings(path / EMBEDDINGS, mmap_mode="r")
        if len(embeddings) != len(documents):
            raise DamagedIndexError(f"{EMBEDDINGS} has {len(embeddings)} rows for {len(documents)} chunks")
    return MappedSnapshot(documents, None if embeddings is None else np.asarray(embeddings), access)


def _mapped_bytes(file: Path) -> bytes | mmap.mmap:
    if file.stat().st_size == 0:
        return b""  # an empty file cannot be mapped
    with file.open("rb") as f:
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)


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


def read_parents(path: Path) -> list[Document]:
    """The snapshot's parent blocks (none for a snapshot without); DamagedIndexError when they disagree with the
    manifest."""
    expected = read_manifest(path).get("parents", 0)
    if not isinstance(expected, int) or expected < 0:
        raise DamagedIndexError(f"{MANIFEST} has no valid 'parents'")
    if not expected:
        return []
    parents = read_chunks(path, PARENTS)
    if len(parents) != expected:
        raise DamagedIndexError(f"{PARENTS} has {len(parents)} parents, the manifest records {expected}")
    return parents


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


def read_chunks(path: Path, name: str = CHUNKS) -> list[Document]:
    """The snapshot's chunks without their embeddings (or its parent blocks, `name=PARENTS`)."""
    file = path / name
    if not file.exists():
        raise DamagedIndexError(f"{name} is missing")
    documents = []
    try:
        with file.open(encoding="utf-8") as f:
            for number, line in enumerate(f, start=1):
                try:
                    documents.append(Document.from_dict(json.loads(line)))
                except (ValueError, TypeError, KeyError, AttributeError):  # JSONDecodeError is a ValueError
                    raise DamagedIndexError(f"{name} line {number} is not a valid chunk") from None
    except UnicodeDecodeError:
        raise DamagedIndexError(f"{name} is not valid UTF-8") from None
    return documents


def _read_embeddings(file: Path, mmap_mode: Literal["r"] | None = None) -> np.ndarray:
    if not file.exists():
        raise DamagedIndexError(f"the manifest records embeddings but {EMBEDDINGS} is missing")
    try:
        embeddings = np.load(file, mmap_mode=mmap_mode)
    except (ValueError, OSError, EOFError) as e:
        raise DamagedIndexError(f"{EMBEDDINGS} is unreadable: {e}") from None
    if embeddings.ndim != 2:
        raise DamagedIndexError(f"{EMBEDDINGS} is not a matrix (shape {embeddings.shape})")
    return embeddings
