"""Chunk-invariant relevance: judge a ranking against an item's relevant units, not against chunk ids.

Chunk ids change whenever the chunking changes, so golden sets name quotes (located as character spans) or
documents instead. A unit is credited only to the first ranked entry that covers it, so overlapping or
duplicate chunks cannot inflate scores.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from haystack import Document

from experiments.golden import GoldenItem


@dataclass(frozen=True)
class Judged:
    """Units first credited at each rank of `ids` (chunk ids in quote mode, doc ids in doc mode)."""

    gains: tuple[int, ...]
    n_units: int
    mode: str
    ids: tuple[str, ...]


def judge(ranking: Sequence[Document], item: GoldenItem, min_overlap: float = 0.5) -> Judged | None:
    """Gains of `ranking` for `item`; None when it is unanswerable or has no units (excluded from retrieval metrics).

    Quote mode (item has evidence): a chunk covers quote i when it overlaps some location of the quote in the
    same document by at least `min_overlap` of the quote's length. Doc mode (only relevant_doc_ids): the
    ranking is collapsed to documents by first occurrence and each relevant document is one unit.
    """
    if not 0 < min_overlap <= 1:
        raise ValueError(f"min_overlap must be in (0, 1], got {min_overlap}")
    if not item.answerable:
        return None
    if item.evidence:
        return _judge_quotes(ranking, item, min_overlap)
    if item.relevant_doc_ids:
        return _judge_docs(ranking, item)
    return None


def _judge_quotes(ranking: Sequence[Document], item: GoldenItem, min_overlap: float) -> Judged:
    if len(item.evidence_spans) != len(item.evidence):
        raise ValueError(
            f"golden item {item.id!r}: evidence not located; load it with load_golden/locate_evidence"
        )
    # doc id -> (unit, start, end, overlap needed) for every location of every quote in that doc
    locations: dict[str, list[tuple[int, int, int, float]]] = {}
    for unit, spans in enumerate(item.evidence_spans):
        for span in spans:
            needed = min_overlap * (span.end - span.start)
            locations.setdefault(span.doc_id, []).append((unit, span.start, span.end, needed))
    credited: set[int] = set()
    gains: list[int] = []
    for chunk in ranking:
        doc_id, start, end = _chunk_span(chunk, item)
        covered = {
            unit
            for unit, q_start, q_end, needed in locations.get(doc_id, ())
            if unit not in credited and min(end, q_end) - max(start, q_start) >= needed
        }
        credited |= covered
        gains.append(len(covered))
    return Judged(tuple(gains), len(item.evidence), "quote", tuple(chunk.id for chunk in ranking))


def _judge_docs(ranking: Sequence[Document], item: GoldenItem) -> Judged:
    relevant = set(item.relevant_doc_ids)
    doc_ids = tuple(dict.fromkeys(_chunk_doc_id(chunk, item) for chunk in ranking))
    return Judged(tuple(int(doc_id in relevant) for doc_id in doc_ids), len(relevant), "doc", doc_ids)


def _chunk_doc_id(chunk: Document, item: GoldenItem) -> str:
    doc_id = chunk.meta.get("doc_id")
    if not isinstance(doc_id, str):
        raise ValueError(f"chunk {chunk.id!r} (judging golden item {item.id!r}): meta 'doc_id' missing")
    return doc_id


def _chunk_span(chunk: Document, item: GoldenItem) -> tuple[str, int, int]:
    span = chunk.meta.get("span")
    if not (isinstance(span, list | tuple) and len(span) == 2):
        raise ValueError(
            f"chunk {chunk.id!r} (judging golden item {item.id!r}): meta 'span' [start, end] missing"
        )
    return _chunk_doc_id(chunk, item), int(span[0]), int(span[1])
