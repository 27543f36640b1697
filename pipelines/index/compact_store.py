"""`store=in_memory`'s document store: chunks as compact JSON records and their vectors as one float32 matrix.

Haystack's InMemoryDocumentStore keeps every Document object with its vector as a Python list of floats and BM25
statistics per document: ~29 KB per 400-character chunk (docs/results/2026-12-03-bench-retrieval.md). Here a chunk
is its JSON record (~0.5 KB) and one matrix row (1.5 KB at 384 dimensions). A store filled from a snapshot
(`map_snapshot`) maps the snapshot's `chunks.jsonl` and `embeddings.npy` read-only, so processes serving one index
on one machine share those pages. The retrievers read `stored_rows()`: the chunks in id order, decoded on access,
beside their matrix, without one Document per chunk held in memory.
"""

from __future__ import annotations

import uuid
import weakref
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from haystack import Document, default_from_dict, default_to_dict
from haystack.document_stores.errors import DuplicateDocumentError
from haystack.document_stores.types import DuplicatePolicy

from components.retrievers.document_masks import ACCESS_FIELDS, DocumentMasks
from components.retrievers.retrieval import StoredRows, stack_vectors
from pipelines.index.records import RecordDocuments, record_of
from pipelines.index.snapshot import MappedSnapshot


@dataclass(eq=False)
class _Content:
    """What a store holds; shared by the stores of one `index` name."""

    positions: dict[str, int] = field(default_factory=dict)  # id -> position in the lists below
    records: list[bytes] = field(default_factory=list)
    vectors: list[np.ndarray | None] = field(default_factory=list)
    mapped: StoredRows | None = None  # a mapped snapshot, until the first write
    rows: StoredRows | None = None


# index name -> content, kept only while a store of that name lives (Haystack's registry keeps its for good).
_CONTENTS: weakref.WeakValueDictionary[str, _Content] = weakref.WeakValueDictionary()


class CompactDocumentStore:
    """A Haystack DocumentStore holding chunks as JSON records and vectors as float32 matrix rows.

    ### Usage example
    ```python
    store = CompactDocumentStore()
    store.write_documents([Document(content="...", embedding=[...])])
    rows = store.stored_rows()  # documents in id order and their vectors, as the retrievers read them
    ```
    """

    def __init__(self, embedding_similarity_function: str = "cosine", index: str | None = None) -> None:
        """
        :param embedding_similarity_function: Recorded for `to_dict` (InMemoryDocumentStore's setting); the
            retrievers choose their own similarity.
        :param index: The content's name: stores of one name in one process share it, as InMemoryDocumentStore's
            do, so a pipeline rebuilt from its `to_dict` (a run's logged pipeline.yaml) searches the same chunks
            while the first store lives. None: a new name.
        """
        self.embedding_similarity_function = embedding_similarity_function
        self.index = index or str(uuid.uuid4())
        content = _CONTENTS.get(self.index)
        if content is None:
            content = _CONTENTS[self.index] = _Content()
        self._content = content

    def to_dict(self) -> dict[str, Any]:
        """Serialise the settings, never the documents (as Haystack's in-memory store)."""
        return default_to_dict(
            self, embedding_similarity_function=self.embedding_similarity_function, index=self.index
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CompactDocumentStore:
        """An empty store with these settings."""
        return default_from_dict(cls, data)

    def count_documents(self) -> int:
        return (
            len(self._content.mapped.documents)
            if self._content.mapped is not None
            else len(self._content.records)
        )

    def map_snapshot(self, snapshot: MappedSnapshot) -> None:
        """Serve a snapshot's files (pipelines/index/snapshot.py `map_snapshot`) in place of this store's content."""
        self._content.positions, self._content.records, self._content.vectors = {}, [], []
        masks = DocumentMasks(snapshot.documents, ACCESS_FIELDS, snapshot.access)
        self._content.mapped = self._content.rows = StoredRows(snapshot.documents, snapshot.embeddings, masks)

    def stored_rows(self) -> StoredRows:
        """The documents in id order (without vectors, decoded on access), their vectors as one matrix (None when
        no document has one) and masks over them for filters; cached until the next write."""
        if self._content.rows is None:
            self._content.rows = self._gather()
        return self._content.rows

    def _gather(self) -> StoredRows:
        order = sorted(self._content.positions, key=lambda doc_id: doc_id)
        positions = [self._content.positions[doc_id] for doc_id in order]
        records = [self._content.records[p] for p in positions]
        documents = RecordDocuments.joined(records)
        matrix, unembedded = stack_vectors(order, [self._content.vectors[p] for p in positions])
        return StoredRows(documents, matrix, DocumentMasks(documents, ACCESS_FIELDS), unembedded)

    def filter_documents(self, filters: dict[str, Any] | None = None) -> list[Document]:
        """The matching documents with their vectors (as lists, Haystack's contract), in id order."""
        rows = self.stored_rows()
        positions = (
            range(len(rows.documents)) if not filters else np.flatnonzero(rows.masks.mask(filters)).tolist()
        )
        found = []
        for position in positions:
            document = rows.documents[position]
            vector = (
                rows.embeddings[position] if rows.embeddings is not None else self._own_vector(document.id)
            )
            found.append(document if vector is None else replace(document, embedding=vector.tolist()))
        return found

    def _own_vector(self, doc_id: str) -> np.ndarray | None:
        """A written document's vector where the matrix is None (some documents have none)."""
        position = self._content.positions.get(doc_id)
        return None if position is None else self._content.vectors[position]

    def write_documents(
        self, documents: list[Document], policy: DuplicatePolicy = DuplicatePolicy.NONE
    ) -> int:
        """Add `documents`; a duplicate id fails (NONE, FAIL), is skipped (SKIP) or replaces the stored one."""
        self._unmap()
        written = 0
        for document in documents:
            if not isinstance(document, Document):
                raise ValueError(f"write_documents takes Documents, got {type(document).__name__}")
            position = self._content.positions.get(document.id)
            if position is not None and policy in (DuplicatePolicy.NONE, DuplicatePolicy.FAIL):
                raise DuplicateDocumentError(f"ID '{document.id}' already exists.")
            if position is not None and policy == DuplicatePolicy.SKIP:
                continue
            vector = None if document.embedding is None else np.asarray(document.embedding, dtype=np.float32)
            if position is None:
                self._content.positions[document.id] = len(self._content.records)
                self._content.records.append(record_of(document))
                self._content.vectors.append(vector)
            else:
                self._content.records[position], self._content.vectors[position] = record_of(document), vector
            written += 1
        self._content.rows = None
        return written

    def delete_documents(self, document_ids: list[str]) -> None:
        """Remove the documents with these ids; unknown ids are ignored."""
        self._unmap()
        gone = {
            self._content.positions[doc_id] for doc_id in document_ids if doc_id in self._content.positions
        }
        if not gone:
            return
        kept = [p for p in range(len(self._content.records)) if p not in gone]
        ids = {p: doc_id for doc_id, p in self._content.positions.items()}
        self._content.records = [self._content.records[p] for p in kept]
        self._content.vectors = [self._content.vectors[p] for p in kept]
        self._content.positions = {ids[p]: new for new, p in enumerate(kept)}
        self._content.rows = None

    def _unmap(self) -> None:
        """A mapped snapshot becomes this store's own content before it changes (never the file's)."""
        if self._content.mapped is None:
            return
        mapped, self._content.mapped = self._content.mapped, None
        for position, document in enumerate(mapped.documents):
            self._content.positions[document.id] = position
            self._content.records.append(record_of(document))
            vector = None if mapped.embeddings is None else np.array(mapped.embeddings[position])
            self._content.vectors.append(vector)
