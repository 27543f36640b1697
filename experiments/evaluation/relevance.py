"""Chunk-invariant relevance: judge a ranking against an item's relevant units, not against chunk ids.

Chunk ids change whenever the chunking changes, so golden sets name quotes (located as character spans) or
documents instead. A unit is credited only to the first ranked entry that covers it, so overlapping or
duplicate chunks cannot inflate scores.

A document without `meta.span` (a compressed strip, a HyDE passage, a web result) is judged by where its text
sits in the corpus: an exact substring of its source document (or of any document) gets that substring's span,
so text that was cut away is never credited. Text found nowhere is non-relevant and counted as unlocated.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from haystack import Document

from experiments.datasets.golden.items import ROW_ID, GoldenItem
from experiments.evaluation.metric_registry import Direction, Layer, declare
from experiments.evaluation.question_record import QuestionRecord, score_values

UNLOCATED = "unlocated_documents"
declare(
    f"<view>/{UNLOCATED}", Layer.RETRIEVAL, Direction.NEITHER,
    "documents of a view without a span whose text is nowhere in the corpus (scored non-relevant), summed over "
    "questions; logged for `retrieval` and `context` always, for other views when they have some",
)
# Views whose unlocated documents are always reported (0 included); other views only when they have some.
REPORTED_UNLOCATED = ("retrieval", "context")


@dataclass(frozen=True)
class Judged:
    """Units first credited at each rank of `ids` (chunk ids in quote mode, doc ids in doc mode)."""

    gains: tuple[int, ...]
    n_units: int
    mode: str
    ids: tuple[str, ...]


# doc id -> its canonical text: where documents without a span are looked up.
Corpus = Mapping[str, str]
Location = tuple[str, int, int]


def locate(doc: Document, corpus: Corpus | None) -> Location | None:
    """(doc id, start, end) of `doc` in the corpus: its own span, else where its text occurs; None if nowhere."""
    doc_id, span = doc.meta.get("doc_id"), doc.meta.get("span")
    if isinstance(doc_id, str) and isinstance(span, list | tuple) and len(span) == 2:
        return doc_id, int(span[0]), int(span[1])
    text = doc.content or ""
    if not text.strip() or not corpus:
        return None
    own = [doc_id] if isinstance(doc_id, str) and doc_id in corpus else []
    for candidate in own or corpus:
        start = corpus[candidate].find(text)
        if start >= 0:
            return candidate, start, start + len(text)
    return None


def is_table_row(doc: Document) -> bool:
    """A row the agent's sql_query tool returned (doc_id sql:<table>/<key>): judged by its id, not its text."""
    return isinstance(doc.meta.get("doc_id"), str) and ROW_ID.fullmatch(doc.meta["doc_id"]) is not None


def unlocated_counts(ranked: Mapping[str, list[Document]], corpus: Corpus | None) -> dict[str, float]:
    """Documents of each view that carry no span and whose text is nowhere in the corpus (scored non-relevant);
    table rows are judged by their id instead."""
    counts = {view: sum(locate(doc, corpus) is None and not is_table_row(doc) for doc in docs)
              for view, docs in ranked.items()}
    return {f"{view}/{UNLOCATED}": float(n) for view, n in counts.items() if n or view in REPORTED_UNLOCATED}


def unlocated_summary(records: Sequence[QuestionRecord]) -> dict[str, float]:
    """The unlocated documents of each view, summed over the questions."""
    names = sorted({key for record in records for key in record.scores if key.endswith(f"/{UNLOCATED}")})
    return {name: float(sum(score_values(records, name))) for name in names}


def judge(
    ranking: Sequence[Document], item: GoldenItem, min_overlap: float = 0.5, corpus: Corpus | None = None
) -> Judged | None:
    """Gains of `ranking` for `item`; None when it is unanswerable or has no units (excluded from retrieval metrics).

    Quote mode (item has evidence or table rows): a chunk covers quote i when it overlaps some location of the
    quote in the same document by at least `min_overlap` of the quote's length; a table row is covered by the
    document whose doc_id is that row's id (what the agent's sql_query tool returns). Doc mode (only relevant_doc_ids): the
    ranking is collapsed to documents by first occurrence and each relevant document is one unit. Entries are
    placed with `locate`; one that cannot be placed gains nothing.
    """
    if not 0 < min_overlap <= 1:
        raise ValueError(f"min_overlap must be in (0, 1], got {min_overlap}")
    if not item.answerable:
        return None
    locations = [locate(doc, corpus) for doc in ranking]
    if item.evidence or item.rows:
        return _judge_quotes(ranking, locations, item, min_overlap)
    if item.relevant_doc_ids:
        return _judge_docs(ranking, locations, item)
    return None


def _judge_quotes(
    ranking: Sequence[Document], located: Sequence[Location | None], item: GoldenItem, min_overlap: float
) -> Judged:
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
    rows = {row: len(item.evidence) + index for index, row in enumerate(item.rows)}
    credited: set[int] = set()
    gains: list[int] = []
    for doc, location in zip(ranking, located, strict=True):
        covered = {rows[doc.meta["doc_id"]]} if is_table_row(doc) and doc.meta["doc_id"] in rows else set()
        if location is not None:
            doc_id, start, end = location
            covered |= {
                unit
                for unit, q_start, q_end, needed in locations.get(doc_id, ())
                if min(end, q_end) - max(start, q_start) >= needed
            }
        covered -= credited
        credited |= covered
        gains.append(len(covered))
    n_units = len(item.evidence) + len(item.rows)
    return Judged(tuple(gains), n_units, "quote", tuple(chunk.id for chunk in ranking))


def _judge_docs(ranking: Sequence[Document], located: Sequence[Location | None], item: GoldenItem) -> Judged:
    """An entry's document is its `meta.doc_id`, else the document its text was found in; unplaced ones gain 0."""
    relevant = set(item.relevant_doc_ids)
    doc_ids = tuple(
        dict.fromkeys(
            doc.meta["doc_id"] if isinstance(doc.meta.get("doc_id"), str) else (loc[0] if loc else f"unlocated:{doc.id}")
            for doc, loc in zip(ranking, located, strict=True)
        )
    )
    return Judged(tuple(int(doc_id in relevant) for doc_id in doc_ids), len(relevant), "doc", doc_ids)
