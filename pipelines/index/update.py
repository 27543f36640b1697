"""`ingest.update`: an incremental build takes the chunks of unchanged documents from the newest snapshot of the
same lineage and ingests only the rest; the result is the snapshot a cold build of the corpus makes."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from haystack import Document

from pipelines.index.snapshot import MANIFEST, DamagedIndexError, read_manifest

logger = logging.getLogger(__name__)


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
