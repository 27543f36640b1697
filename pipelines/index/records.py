"""Chunks as JSON records, one a line: how a snapshot's `chunks.jsonl` holds them and how CompactDocumentStore keeps
them in memory, decoded into Documents only when one is asked for."""

from __future__ import annotations

import json
import mmap
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import overload

import numpy as np
from haystack import Document

NEWLINE = 10
SCAN_BLOCK = 1 << 26  # bytes searched for line ends at a time: no temporary the size of the file


def record_of(document: Document) -> bytes:
    """A chunk's JSON line without its newline: everything but its vector (dropped first: `to_dict` deep-copies
    every float of it, ~2 ms a chunk)."""
    record = replace(document, embedding=None).to_dict(flatten=False)
    record.pop("embedding", None)
    return json.dumps(record, ensure_ascii=False).encode("utf-8")


class RecordDocuments(Sequence[Document]):
    """Documents decoded on access from JSON records held in one buffer (a mapped file, or records joined in
    memory): a chunk costs its record's bytes and two offsets, not a Document object."""

    def __init__(self, buffer: bytes | mmap.mmap, starts: np.ndarray, ends: np.ndarray) -> None:
        self._buffer = buffer
        self._starts = starts
        self._ends = ends

    @classmethod
    def of(cls, buffer: bytes | mmap.mmap) -> RecordDocuments:
        """The records of a JSONL buffer, one a line (the last line may lack its newline)."""
        view = np.frombuffer(buffer, dtype=np.uint8) if len(buffer) else np.zeros(0, dtype=np.uint8)
        found = [
            np.flatnonzero(view[at : at + SCAN_BLOCK] == NEWLINE) + at
            for at in range(0, len(view), SCAN_BLOCK)
        ]
        ends = np.concatenate(found) if found else np.zeros(0, dtype=np.int64)
        if len(view) and (not len(ends) or ends[-1] != len(view) - 1):
            ends = np.append(ends, len(view))
        starts = np.concatenate(([0], ends[:-1] + 1)).astype(np.int64) if len(ends) else ends
        return cls(buffer, starts, ends.astype(np.int64))

    @classmethod
    def joined(cls, records: Sequence[bytes]) -> RecordDocuments:
        """Records held in memory, joined into one buffer."""
        lengths = np.asarray([len(record) for record in records], dtype=np.int64)
        ends = np.cumsum(lengths, dtype=np.int64)
        return cls(b"".join(records), ends - lengths, ends)

    def __len__(self) -> int:
        return len(self._starts)

    @overload
    def __getitem__(self, index: int) -> Document: ...
    @overload
    def __getitem__(self, index: slice) -> list[Document]: ...
    def __getitem__(self, index: int | slice) -> Document | list[Document]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        return _decoded(self._buffer[self._starts[index] : self._ends[index]])

    def records(self) -> Iterator[bytes]:
        """Each record's bytes, in order."""
        for start, end in zip(self._starts.tolist(), self._ends.tolist(), strict=True):
            yield self._buffer[start:end]

    def __iter__(self) -> Iterator[Document]:
        return map(_decoded, self.records())


def _decoded(record: bytes) -> Document:
    return Document.from_dict(json.loads(record))
