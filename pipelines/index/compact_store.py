"""`store=in_memory`'s document store: chunks as compact JSON records and their vectors as one float32 matrix.

Haystack's InMemoryDocumentStore keeps every Document object with its vector as a Python list of floats and BM25
statistics per document: ~29 KB per 400-character chunk (docs/results/2026-12-03-bench-retrieval.md). Here a chunk
is its JSON record (~0.5 KB) and one matrix row (1.5 KB at 384 dimensions). A store filled from a snapshot
(`map_snapshot`) maps the snapshot's `chunks.jsonl` and `embeddings.npy` read-only, so processes serving one index
on one machine share those pages. The retrievers read `stored_rows()`: the chunks in id order, decoded on access,
beside their matrix, without one Document per chunk held in memory.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
from haystack import Document, default_from_dict, default_to_dict
from haystack.document_stores.errors import DuplicateDocumentError
from haystack.document_stores.types import DuplicatePolicy

from components.retrievers.document_masks import ACCESS_FIELDS, DocumentMasks
from components.retrievers.retrieval import StoredRows, stack_vectors
from pipelines.index.records import RecordDocuments, record_of
from pipelines.index.snapshot import MappedSnapshot


class CompactDocumentStore:
    """A Haystack DocumentStore holding chunks as JSON records and vectors as float32 matrix rows.

    ### Usage example
    ```python
    store = CompactDocumentStore()
    store.write_documents([Document(content="...", embedding=[...])])
    rows = store.stored_rows()  # documents in id order and their vectors, as the retrievers read them
    ```
    """

    def __init__(self, embedding_similarity_function: str = "cosine") -> None:
        """
        :param embedding_similarity_function: Recorded for `to_dict` (InMemoryDocumentStore's setting); the
            retrievers choose their own similarity.
        """
        self.embedding_similarity_function = embedding_similarity_function
        self._positions: dict[str, int] = {}  # id -> position in the lists below
        self._records: list[bytes] = []
        self._vectors: list[np.ndarray | None] = []
        self._mapped: StoredRows | None = None  # a mapped snapshot, until the first write
        self._rows: StoredRows | None = None

    def to_dict(self) -> dict[str, Any]:
        """Serialise the settings, never the documents (as Haystack's in-memory store)."""
        return default_to_dict(self, embedding_similarity_function=self.embedding_similarity_function)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CompactDocumentStore:
        """An empty store with these settings."""
        return default_from_dict(cls, data)

    def count_documents(self) -> int:
        return len(self._mapped.documents) if self._mapped is not None else len(self._records)

    def map_snapshot(self, snapshot: MappedSnapshot) -> None:
        """Serve a snapshot's files (pipelines/index/snapshot.py `map_snapshot`) in place of this store's content."""
        self._positions, self._records, self._vectors = {}, [], []
        masks = DocumentMasks(snapshot.documents, ACCESS_FIELDS, snapshot.access)
        self._mapped = self._rows = StoredRows(snapshot.documents, snapshot.embeddings, masks)

    def stored_rows(self) -> StoredRows:
        """The documents in id order (without vectors, decoded on access), their vectors as one matrix (None when
        no document has one) and masks over them for filters; cached until the next write."""
        if self._rows is None:
            self._rows = self._gather()
        return self._rows

    def _gather(self) -> StoredRows:
        order = sorted(self._positions, key=lambda doc_id: doc_id)
        positions = [self._positions[doc_id] for doc_id in order]
        records = [self._records[p] for p in positions]
        documents = RecordDocuments.joined(records)
        matrix, unembedded = stack_vectors(order, [self._vectors[p] for p in positions])
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
        position = self._positions.get(doc_id)
        return None if position is None else self._vectors[position]

    def write_documents(
        self, documents: list[Document], policy: DuplicatePolicy = DuplicatePolicy.NONE
    ) -> int:
        """Add `documents`; a duplicate id fails (NONE, FAIL), is skipped (SKIP) or replaces the stored one."""
        self._unmap()
        written = 0
        for document in documents:
            if not isinstance(document, Document):
                raise ValueError(f"write_documents takes Documents, got {type(document).__name__}")
            position = self._positions.get(document.id)
            if position is not None and policy in (DuplicatePolicy.NONE, DuplicatePolicy.FAIL):
                raise DuplicateDocumentError(f"ID '{document.id}' already exists.")
            if position is not None and policy == DuplicatePolicy.SKIP:
                continue
            vector = None if document.embedding is None else np.asarray(document.embedding, dtype=np.float32)
            if position is None:
                self._positions[document.id] = len(self._records)
                self._records.append(record_of(document))
                self._vectors.append(vector)
            else:
                self._records[position], self._vectors[position] = record_of(document), vector
            written += 1
        self._rows = None
        return written

    def delete_documents(self, document_ids: list[str]) -> None:
        """Remove the documents with these ids; unknown ids are ignored."""
        self._unmap()
        gone = {self._positions[doc_id] for doc_id in document_ids if doc_id in self._positions}
        if not gone:
            return
        kept = [p for p in range(len(self._records)) if p not in gone]
        ids = {p: doc_id for doc_id, p in self._positions.items()}
        self._records = [self._records[p] for p in kept]
        self._vectors = [self._vectors[p] for p in kept]
        self._positions = {ids[p]: new for new, p in enumerate(kept)}
        self._rows = None

    def _unmap(self) -> None:
        """A mapped snapshot becomes this store's own content before it changes (never the file's)."""
        if self._mapped is None:
            return
        mapped, self._mapped = self._mapped, None
        for position, document in enumerate(mapped.documents):
            self._positions[document.id] = position
            self._records.append(record_of(document))
            vector = None if mapped.embeddings is None else np.array(mapped.embeddings[position])
            self._vectors.append(vector)
