"""Who may see each document of an index: the access contract a run records and a promoted version carries.

A document with neither `tenant` nor `acl` is public; one with a `tenant` is seen by that tenant only, and with an
`acl` only by that tenant's principals in one of its groups; an `acl` without a `tenant` is seen by nobody (the
rule of serving/principals.py). Promotion compares two contracts and refuses a candidate under which anyone could
see a document the version it replaces hid from them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipelines.run_layout import ACCESS_FIELDS_TAG, ACCESS_META_FILE_TAG

ACCESS_KEYS = ("tenant", "acl")
SHOWN_DOCUMENTS = 3  # documents named in a refusal; the count says how many more


@dataclass(frozen=True)
class DocumentAccess:
    tenant: str | None = None
    acl: frozenset[str] | None = None

    @classmethod
    def of(cls, meta: Mapping[str, Any]) -> DocumentAccess:
        acl = meta.get("acl")
        return cls(meta.get("tenant"), None if acl is None else frozenset(str(group) for group in acl))

    @property
    def public(self) -> bool:
        return self.tenant is None and self.acl is None

    @property
    def hidden(self) -> bool:
        """An ACL that names no tenant's groups: nobody sees it (fail closed)."""
        return self.tenant is None and self.acl is not None

    def within(self, before: DocumentAccess) -> bool:
        """Whether everyone who may see the document now could see it under `before`."""
        if self.hidden or before.public:
            return True
        if before.hidden or self.public or self.tenant != before.tenant:
            return False
        return before.acl is None or (self.acl is not None and self.acl <= before.acl)

    def to_json(self) -> dict[str, Any]:
        return {"tenant": self.tenant, "acl": None if self.acl is None else sorted(self.acl)}


@dataclass(frozen=True)
class IndexAccess:
    """Each source document's access, the access fields any of them holds, and the digest of the meta file they
    came from (`dataset.meta_file`), when there was one."""

    documents: Mapping[str, DocumentAccess] = field(default_factory=dict)
    meta_file: str | None = None

    @classmethod
    def of(cls, metas: Iterable[tuple[str, Mapping[str, Any]]], meta_file: str | None = None) -> IndexAccess:
        """From (doc_id, meta) pairs: source documents, or chunks (which carry their document's meta)."""
        return cls({str(doc_id): DocumentAccess.of(meta) for doc_id, meta in metas}, meta_file)

    @property
    def fields(self) -> tuple[str, ...]:
        held = {key for access in self.documents.values() for key in ACCESS_KEYS if getattr(access, key) is not None}
        return tuple(sorted(held))

    @property
    def scoped(self) -> bool:
        """Tenant-split: some document is not public, so what a caller sees depends on who asks."""
        return bool(self.fields)

    def summary(self) -> str:
        if not self.scoped:
            return f"not tenant-split: none of its {len(self.documents)} documents has a tenant or acl"
        scoped = [a for a in self.documents.values() if not a.public]
        tenants = {a.tenant for a in scoped if a.tenant is not None}
        return (
            f"tenant-split: {len(scoped)} of {len(self.documents)} documents scoped by {', '.join(self.fields)} "
            f"across {len(tenants)} tenant{'s' if len(tenants) != 1 else ''}"
        )

    def tags(self) -> dict[str, str]:
        return {
            ACCESS_FIELDS_TAG: ",".join(self.fields) or "none",
            ACCESS_META_FILE_TAG: self.meta_file or "none",
        }

    def widened_from(self, before: IndexAccess) -> list[str]:
        """Why this contract would let someone see what `before` hid from them; empty when it would not."""
        reasons = []
        dropped = sorted(set(before.fields) - set(self.fields))
        if dropped:
            reasons.append(f"access fields dropped: {', '.join(dropped)}")
        if before.meta_file is not None and self.meta_file != before.meta_file:
            reasons.append(f"a different meta file (sha256 {before.meta_file[:12]} -> {(self.meta_file or 'none')[:12]})")
        wider = sorted(
            doc_id
            for doc_id, access in self.documents.items()
            if doc_id in before.documents and not access.within(before.documents[doc_id])
        )
        if wider:
            more = f" and {len(wider) - SHOWN_DOCUMENTS} more" if len(wider) > SHOWN_DOCUMENTS else ""
            reasons.append(f"{len(wider)} documents visible more widely: {', '.join(wider[:SHOWN_DOCUMENTS])}{more}")
        return reasons

    def to_json(self) -> dict[str, Any]:
        return {
            "fields": list(self.fields),
            "meta_file": self.meta_file,
            "documents": {doc_id: access.to_json() for doc_id, access in sorted(self.documents.items())},
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> IndexAccess:
        return cls.of(data["documents"].items(), data.get("meta_file"))

    def write(self, path: Path) -> None:
        path.write_text(json.dumps(self.to_json(), indent=1, ensure_ascii=False), encoding="utf-8")

    @classmethod
    def read(cls, path: Path) -> IndexAccess:
        return cls.from_json(json.loads(path.read_text(encoding="utf-8")))


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
