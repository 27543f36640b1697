"""`store=weaviate`: the index is a Weaviate collection named by the index fingerprint, searched on the server.

A collection counts as a cached index only when its description holds the manifest of a finished build with this
fingerprint and its object count matches the manifest; anything else under that name is a killed build's debris,
dropped and rebuilt. Nothing here reads the whole collection back into this process.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from haystack import Document
from haystack.document_stores.types import DocumentStore

from components.common.sentence_units import SENTENCE_ID
from components.retrievers.weaviate_search import EXACT_TEXT, EXACT_TEXT_ARRAYS
from pipelines.builder import build_pipeline
from pipelines.errors import UserError
from pipelines.index.backend import IndexInfo
from pipelines.index.locking import exclusive_build
from pipelines.index.snapshot import MANIFEST, read_manifest
from pipelines.index.spec import IngestChain

logger = logging.getLogger(__name__)

INSTALL_HINT = "pip install -e '.[weaviate]' (scripts/setup.sh installs it)"
# What a collection's description says while it is being filled; a finished build replaces it with its manifest.
BUILDING = "ragtune: build in progress"
PREFIX = re.compile(r"[A-Z][A-Za-z0-9_]*")


class WeaviateUnavailableError(UserError):
    """No Weaviate to talk to: the package is missing, no URL is set, or the server does not answer."""


# Weaviate's tokenizer per corpus language (as the dataset resolves it). `gse_ch` segments Chinese words with gse's
# Chinese dictionary (`gse` is its Japanese one) but cuts Latin words into letters (weaviate/weaviate#6115), and
# Weaviate has no tokenizer that does both, so a bilingual corpus gets `trigram`: it serves both scripts, though a
# query of fewer than three letters finds nothing.
TOKENIZATIONS = {"en": "word", "zh": "gse_ch", "mixed": "trigram"}


def content_tokenization(language: str, tokenization: str | None) -> str:
    """How Weaviate's BM25 splits `content`: `store.tokenization` when set, else by the corpus language."""
    if tokenization:
        return tokenization
    return TOKENIZATIONS.get(language, TOKENIZATIONS["mixed"])


def collection_name(prefix: str, fingerprint: str) -> str:
    """Weaviate collection names start with a capital letter and hold only letters, digits and underscores."""
    if not PREFIX.fullmatch(prefix):
        raise UserError(
            f"config key 'store.collection_prefix': {prefix!r} must start with a capital letter and hold only "
            "letters, digits and underscores (Weaviate's rule for collection names)"
        )
    return f"{prefix}_{fingerprint}"


def collection_settings(name: str, tokenization: str) -> dict[str, Any]:
    """The collection's schema, as WeaviateDocumentStore's `collection_settings` (Weaviate's REST form).

    Vectors come from our embedder (`vectorizer: none`) and are compared by cosine, as the in-memory retriever
    does. Null state is indexed because a public document is one whose `tenant` and `acl` are null. Metadata
    fields not listed here are added by Weaviate's auto-schema when first written.
    """
    def text(field: str, tokenize: str, array: bool = False) -> dict[str, Any]:
        return {"name": field, "dataType": ["text[]" if array else "text"], "tokenization": tokenize}

    properties = [
        text("content", tokenization),
        *(text(field, "field") for field in EXACT_TEXT),
        *(text(field, "field", array=True) for field in EXACT_TEXT_ARRAYS),
        text("heading_path", tokenization, array=True),
        {"name": "span", "dataType": ["int[]"]},
        # Filtered by range by the sentence-window expansion: declared an int rather than left to auto-schema's guess.
        {"name": SENTENCE_ID, "dataType": ["int"]},
        {"name": "blob_data", "dataType": ["blob"]},
        {"name": "blob_mime_type", "dataType": ["text"]},
        {"name": "score", "dataType": ["number"]},
    ]
    return {
        "class": name,
        "description": BUILDING,
        "vectorizer": "none",
        "vectorIndexConfig": {"distance": "cosine"},
        "invertedIndexConfig": {"indexNullState": True},
        "properties": properties,
    }


def weaviate_document_store(
    url: str | None,
    fingerprint: str,
    collection_prefix: str = "Ragtune",
    language: str = "auto",
    tokenization: str | None = None,
    grpc_port: int = 50051,
    api_key_env: str | None = None,
) -> Any:
    """A WeaviateDocumentStore on the fingerprint's collection, connected now so that a missing package, URL or
    server fails before any indexing, naming what to do."""
    try:
        from haystack.utils import Secret
        from haystack_integrations.document_stores.weaviate import AuthApiKey, WeaviateDocumentStore
    except ImportError:
        raise WeaviateUnavailableError(f"store=weaviate needs weaviate-haystack: {INSTALL_HINT}") from None
    if not url:
        raise WeaviateUnavailableError(
            "config key 'store.url': store=weaviate needs a server; set WEAVIATE_URL (or store.url), e.g. "
            "http://localhost:8080 after `docker compose up -d weaviate`"
        )
    name = collection_name(collection_prefix, fingerprint)
    auth = AuthApiKey(Secret.from_env_var(api_key_env)) if api_key_env else None
    store = WeaviateDocumentStore(
        url=url,
        collection_settings=collection_settings(name, content_tokenization(language, tokenization)),
        auth_client_secret=auth,
        grpc_port=grpc_port,
    )
    try:
        store.client  # noqa: B018 -- connects (and creates the collection when it is new)
    except Exception as e:  # the client raises its own connection, auth and schema errors
        if not lost_creation_race(store, name):
            raise WeaviateUnavailableError(f"store=weaviate: cannot use {url} (gRPC port {grpc_port}): {e}") from None
    return store


def lost_creation_race(store: Any, name: str) -> bool:
    """Whether connecting failed only because another sweep job created the collection between the client's
    existence check and its own create (before either holds the build lock): then the store is ready to use."""
    client = store._client  # set once connected, before the collection is created
    try:
        return client is not None and client.is_connected() and client.collections.exists(name)
    except Exception:  # the server went away too: the caller reports the first error
        return False


def collection_manifest(store: Any) -> dict[str, Any] | None:
    """The finished build's manifest in the collection's description; None while building or when unreadable."""
    description = store.collection.config.get().description or ""
    try:
        manifest = json.loads(description)
    except json.JSONDecodeError:
        return None
    return manifest if isinstance(manifest, dict) and isinstance(manifest.get("chunks"), int) else None


def is_complete(manifest: Mapping[str, Any] | None, fingerprint: str, count: int) -> bool:
    return manifest is not None and manifest.get("fingerprint") == fingerprint and manifest["chunks"] == count


def build_collection(
    documents: list[Document],
    spec: Mapping[str, Any],
    store: Any,
    cache_dir: Path,
    fingerprint: str,
    lineage: str | None = None,
    update: bool = False,
    parents: DocumentStore | None = None,
) -> IndexInfo:
    """The collection as it is when complete, else ingested into (after emptying it) and marked complete.

    The build lock lives in `cache_dir`, so sweep jobs sharing it wait for one builder; jobs on other machines
    need it on a shared filesystem, as for in-memory snapshots. `update`, and an index with parent blocks (for
    `parents`), are refused before any work is done (`check_collection_options`)."""
    start = time.perf_counter()
    name = store.collection.name
    with exclusive_build(cache_dir, fingerprint):
        count = store.count_documents()
        manifest = collection_manifest(store)
        if is_complete(manifest, fingerprint, count):
            record_collection(cache_dir / fingerprint, manifest | {"collection": name})
            return IndexInfo(fingerprint, Path(name), True, count, time.perf_counter() - start)
        damage = None
        # Unfinished until this build ends: a killed rebuild must not leave an earlier manifest standing.
        store.collection.config.update(description=BUILDING)
        if count:
            recorded = f"its build recorded {manifest['chunks']}" if manifest else "no finished build's manifest"
            damage = f"collection {name} holds {count} objects but {recorded}"
            logger.warning("%s; emptying and rebuilding it", damage)
            store.delete_all_documents()
        ingest = build_pipeline(spec, {"store": store}, key="ingest")
        ingest.warm_up()
        ingest.run(documents=documents)
        chunks = store.count_documents()
        recorded = {"fingerprint": fingerprint, "lineage": lineage, "chunks": chunks, "documents": len(documents),
                    "created": time.time()}
        store.collection.config.update(description=json.dumps(recorded))
        record_collection(cache_dir / fingerprint, recorded | {"collection": name})
    return IndexInfo(fingerprint, Path(name), False, chunks, time.perf_counter() - start, damage)


def record_collection(path: Path, manifest: dict[str, Any]) -> None:
    """Where a snapshot would be, a manifest naming the finished collection and its build: promotion ships it, so
    a served model opens exactly the build it was evaluated on (`open_collection`)."""
    path.mkdir(parents=True, exist_ok=True)
    staged = path / f".{MANIFEST}.{os.getpid()}"
    staged.write_text(json.dumps(manifest | {"embeddings": True, "store": "weaviate"}, indent=2), encoding="utf-8")
    os.replace(staged, path / MANIFEST)


def open_collection(store: Any, record_dir: Path) -> IndexInfo:
    """A promoted run's collection, checked against the record its bundle ships: the same build, still whole."""
    start = time.perf_counter()
    record = read_manifest(record_dir)
    name, count = store.collection.name, store.count_documents()
    found = collection_manifest(store)
    if found is None or found.get("created") != record.get("created") or not is_complete(
        found, record["fingerprint"], count
    ):
        raise UserError(
            f"collection {name}: not the build this model was evaluated on (it holds {count} objects; the run "
            f"indexed {record['chunks']} at {record.get('created')}); rerun the run's config to rebuild it, then "
            "evaluate and promote again"
        )
    return IndexInfo(record["fingerprint"], Path(name), True, count, time.perf_counter() - start)


def check_collection_options(ingest: IngestChain, update: bool) -> None:
    """What a collection cannot do: refused before any work, naming the config key."""
    if update:
        raise UserError(
            "config key 'ingest.update': incremental updates work on in-memory snapshots only; with store=weaviate "
            "a changed corpus is a new collection (its fingerprint differs), built from scratch"
        )
    if ingest.parents is not None:
        raise UserError(
            f"config key 'ingest': ingest={ingest.name} keeps its parent blocks in a second, in-memory store beside "
            "the index, which store=weaviate does not have; use store=in_memory"
        )


@dataclass(frozen=True)
class WeaviateCollections:
    """The IndexBackend of `store=weaviate`: an index is a collection on the server, recorded in the index cache."""

    tokenization: str | None  # store.tokenization: null picks one by the corpus language
    server_side = True

    def identity(self, language: str) -> str:
        """How BM25 tokenises `content` changes what the collection finds, so it is part of the index."""
        return f"weaviate:{content_tokenization(language, self.tokenization)}"

    build = staticmethod(build_collection)

    def open(self, store: DocumentStore, index_dir: Path, parents: DocumentStore | None = None) -> IndexInfo:
        """A collection holds no parent blocks: `parents` stays empty (check_collection_options)."""
        return open_collection(store, index_dir)
