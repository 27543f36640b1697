"""The ingestion graph as a pipeline spec: what `ingest.*` and the document embedder configure, in the form
pipelines/builder.py builds and pipelines/index/fingerprint.py fingerprints."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import pairwise
from typing import Any, Protocol

from pipelines.spec import plain

# The ingestion component that embeds chunks; its model is fingerprinted as `embedder_identity`.
DOCUMENT_EMBEDDER = "embedder"
# The ingestion component that writes the parent blocks (`ingest.parents`) to the parent store.
PARENT_WRITER = "parent_writer"
# The ingestion component that re-links the parent blocks to the guarded chunks (`ingest.parents`).
TREE = "tree"


class IngestChain(Protocol):
    """What the ingestion graph is made of (the run's `ingest` settings)."""

    name: str
    chain: Sequence[str]
    splitters: Mapping[str, Any]
    heading_prefix: bool
    chunk_size: int
    min_chunk_size: int
    max_chunk_size: int | None
    parents: str | None


def ingest_spec(ingest: IngestChain, document_embedder: Mapping[str, Any] | None) -> dict[str, Any]:
    """The ingestion graph: configured splitters in `ingest.chain`, then spans, the guard (no code block or table
    cut, no chunk under `ingest.min_chunk_size`, none it makes over `ingest.max_chunk_size`), heading prefix,
    embedding, write; with `ingest.parents`, that splitter's `parents`, re-linked to the guarded chunks after the
    guard, go to a second store (`@parents`), unembedded and never searched.

    `document_embedder=None` leaves embedding out, for query pipelines that read no vectors (BM25 only): the
    snapshot then has no embeddings, and its fingerprint differs from the embedded index's.
    """
    chain = list(ingest.chain)
    components: dict[str, Any] = {name: plain(ingest.splitters[name]) for name in chain}
    components |= {
        "spans": {"_target_": "components.preprocessors.chunk_span_locator.ChunkSpanLocator"},
        "guard": {
            "_target_": "components.preprocessors.chunk_guard.ChunkGuard",
            "min_chars": ingest.min_chunk_size,
            "chunk_size": ingest.chunk_size,
            "max_chars": ingest.max_chunk_size,
        },
    }
    if ingest.parents is not None:
        components[TREE] = {"_target_": "components.preprocessors.block_tree_mender.BlockTreeMender"}
    components |= {
        "prefix": {"_target_": "components.preprocessors.heading_prefixer.HeadingPrefixer", "enabled": ingest.heading_prefix},
    }
    if document_embedder is not None:
        components[DOCUMENT_EMBEDDER] = plain(document_embedder)
    components["writer"] = {
        "_target_": "haystack.components.writers.DocumentWriter",
        "document_store": "@store",
        "policy": "OVERWRITE",
    }
    after_spans = list(components)[len(chain) :]
    connections = [[f"{a}.documents", f"{b}.documents"] for a, b in pairwise(chain)]
    connections.append([f"{chain[-1]}.documents", "spans.chunks"])
    connections += [[f"{a}.documents", f"{b}.documents"] for a, b in pairwise(after_spans)]
    inputs = [f"{chain[0]}.documents", "spans.sources", "guard.sources"]
    if ingest.parents is not None:
        components[PARENT_WRITER] = {**components["writer"], "document_store": "@parents"}
        connections += [
            [f"{ingest.parents}.parents", f"{TREE}.parents"],
            [f"{TREE}.parents", f"{PARENT_WRITER}.documents"],
        ]
        inputs.append(f"{TREE}.sources")
    return {
        "name": f"ingest-{ingest.name}",
        "components": components,
        "connections": connections,
        "inputs": {"documents": inputs},
    }
