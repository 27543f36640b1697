"""Each golden item's evidence quotes located in the corpus, and its doc ids checked against it.

Quotes are matched after whitespace normalisation (conversion may re-flow lines) and mapped back to offsets in the
original canonical text, which is what chunk spans refer to. `load_golden` skips items marked `"status":
"candidate"` unless told to include them, so an unreviewed guess never moves a metric by accident.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from itertools import accumulate
from pathlib import Path

from haystack import Document

from experiments.datasets.golden.items import EvidenceSpan, GoldenError, GoldenItem, normalise_whitespace
from experiments.datasets.golden.parsing import read_golden

logger = logging.getLogger(__name__)
_TOKEN = re.compile(r"\S+")
_QUOTE_PREVIEW = 80


def load_golden(
    path: str | Path,
    documents: Sequence[Document],
    skipped: Mapping[str, str] | None = None,
    include_candidates: bool = False,
) -> list[GoldenItem]:
    """Parse the golden JSONL at `path` and locate its quotes in `documents`; one GoldenError for all problems.

    `skipped` maps the doc ids of corpus files left out at conversion to the reason, so an item citing one
    says why the file is missing instead of calling its id unknown. Items marked `"status": "candidate"` are left
    out (and their quotes not looked for) unless `include_candidates`; one log line says how many.
    """
    origin = str(path)
    parsed, problems = read_golden(path)
    if not parsed and not problems:
        problems = [f"{origin}: no golden items (the file is empty)"]
    candidates = sum(item.candidate for _, item in parsed)
    if candidates and not include_candidates:
        parsed = [(line, item) for line, item in parsed if not item.candidate]
        logger.info("golden set %s: skipped %d candidate item(s) (\"status\": \"candidate\", not reviewed yet); "
                    "dataset.include_candidates=true loads them", origin, candidates)
    items = [item for _, item in parsed]
    wheres = [f"{origin}:{line}" for line, _ in parsed]
    located, locate_problems = _locate(items, wheres, documents, skipped or {})
    problems += locate_problems
    if problems:
        raise GoldenError(origin, problems)
    return located


def locate_evidence(
    items: Sequence[GoldenItem],
    documents: Sequence[Document],
    origin: str,
    lines: Sequence[int] | None = None,
) -> list[GoldenItem]:
    """Items with `evidence_spans` filled in; also checks `source` and `relevant_doc_ids` against the corpus.

    `lines` are the items' line numbers for error messages; by default their 1-based positions.
    """
    numbers = lines if lines is not None else range(1, len(items) + 1)
    located, problems = _locate(items, [f"{origin}:{n}" for n in numbers], documents, {})
    if problems:
        raise GoldenError(origin, problems)
    return located


def locate_each(items: Sequence[GoldenItem], documents: Sequence[Document]) -> list[GoldenItem | None]:
    """Each item with its quotes located, or None where a quote (or its source) is not in `documents`: for sets
    that drop what cannot be found (experiments/datasets/testset.py) instead of stopping."""
    located, _ = _locate(items, [item.id for item in items], documents, {})
    by_id = {item.id: item for item in located}
    return [
        found if (found := by_id.get(item.id)) is not None and all(found.evidence_spans) else None for item in items
    ]


def _locate(
    items: Sequence[GoldenItem],
    wheres: Sequence[str],
    documents: Sequence[Document],
    skipped: Mapping[str, str],
) -> tuple[list[GoldenItem], list[str]]:
    """Items with every quote located, plus one message per unknown doc id or quote found nowhere."""
    corpus = _Corpus(documents)
    problems: list[str] = []
    quotes = [[normalise_whitespace(q) for q in item.evidence] for item in items]
    corpus.index_words([q for qs in quotes for q in qs])
    located: list[GoldenItem] = []
    for item, where, item_quotes in zip(items, wheres, quotes, strict=True):
        label = f"{where} (id={item.id})"
        problems += [
            f"{label}: relevant_doc_ids entry {doc_id!r} {_absent(doc_id, skipped)}"
            for doc_id in item.relevant_doc_ids
            if doc_id not in corpus.normalised
        ]
        if item.source is not None and item.source not in corpus.normalised:
            problems.append(f"{label}: source {item.source!r} {_absent(item.source, skipped)}")
            continue
        spans = tuple(corpus.find(quote, item.source) if quote else () for quote in item_quotes)
        scope = repr(item.source) if item.source is not None else "the corpus"
        problems += [
            f"{label}: evidence quote not found in {scope} after whitespace normalisation: '{quote[:_QUOTE_PREVIEW]}'"
            for quote, found in zip(item_quotes, spans, strict=True)
            if not found
        ]
        located.append(dataclasses.replace(item, evidence_spans=spans))
    return located, problems


def _absent(doc_id: str, skipped: Mapping[str, str]) -> str:
    """Why `doc_id` is not in the corpus, as the end of a problem sentence."""
    if doc_id in skipped:
        return f"was skipped when the corpus was converted: {skipped[doc_id]}"
    return "is not a doc id in the corpus"


def _interior(quote: str) -> list[str]:
    """The interior words of a normalised quote: complete words (the first and last may be cut mid-word)."""
    return quote.split(" ")[1:-1]


class _Corpus:
    """Normalised texts built once per corpus; offset maps back to the original text are built on demand.

    A quote of three or more words is looked up by its anchor, its rarest interior word (a complete word of the
    quote, hence a word of the text at every match): one pass over the documents lists where each interior word
    stands, and only the anchor's places are checked, so a long document is not scanned again for every quote. A
    shorter quote (or one without spaces, as Chinese is) is searched in its source, or without one in a single
    scan of all normalised texts joined by newlines, which no quote contains.
    """

    def __init__(self, documents: Sequence[Document]) -> None:
        self.originals = {doc.id: doc.content or "" for doc in documents}
        self.normalised = {doc_id: normalise_whitespace(text) for doc_id, text in self.originals.items()}
        self._doc_ids = list(self.normalised)
        self._token_starts: dict[str, tuple[list[int], list[int]]] = {}
        self._postings: dict[str, list[int]] = {}
        self._first_words: list[int] = []
        self._joined: tuple[str, list[int]] | None = None

    def index_words(self, quotes: Iterable[str]) -> None:
        """Where the interior words of `quotes` stand: the number of every occurrence among the corpus's words."""
        wanted = {word for quote in quotes for word in _interior(quote)}
        self._postings = {word: [] for word in wanted}
        self._first_words = []
        first = 0
        for doc_id in self._doc_ids:
            self._first_words.append(first)
            words = self.normalised[doc_id].split(" ")
            if not wanted.isdisjoint(words):
                for number, word in enumerate(words, start=first):
                    if word in wanted:
                        self._postings[word].append(number)
            first += len(words)

    def find(self, quote: str, source: str | None) -> tuple[EvidenceSpan, ...]:
        """Every (overlapping) occurrence of the normalised `quote`, in `source` only when given."""
        interior = _interior(quote)
        if not interior:
            return self._find_in(quote, source) if source is not None else self._scan_all(quote)
        anchor = min(interior, key=lambda word: len(self._postings[word]))
        before = quote.index(f" {anchor} ") + 1  # each match has the anchor's first interior place on a word
        spans = []
        for number in self._postings[anchor]:
            index = bisect_right(self._first_words, number) - 1
            doc_id = self._doc_ids[index]
            if source is not None and doc_id != source:
                continue
            start = self._starts(doc_id)[1][number - self._first_words[index]] - before
            if start >= 0 and self.normalised[doc_id].startswith(quote, start):
                spans.append(self._span(doc_id, start, len(quote)))
        return tuple(spans)

    def _find_in(self, quote: str, doc_id: str) -> tuple[EvidenceSpan, ...]:
        text = self.normalised[doc_id]
        spans: list[EvidenceSpan] = []
        position = text.find(quote)
        while position != -1:
            spans.append(self._span(doc_id, position, len(quote)))
            position = text.find(quote, position + 1)
        return tuple(spans)

    def _scan_all(self, quote: str) -> tuple[EvidenceSpan, ...]:
        if self._joined is None:
            starts = list(accumulate((len(self.normalised[d]) + 1 for d in self._doc_ids[:-1]), initial=0))
            self._joined = ("\n".join(self.normalised.values()), starts)
        joined, starts = self._joined
        spans: list[EvidenceSpan] = []
        position = joined.find(quote)
        while position != -1:
            index = bisect_right(starts, position) - 1
            spans.append(self._span(self._doc_ids[index], position - starts[index], len(quote)))
            position = joined.find(quote, position + 1)
        return tuple(spans)

    def _span(self, doc_id: str, position: int, length: int) -> EvidenceSpan:
        """Normalised [position, position+length) as original offsets; both ends lie inside words."""
        return EvidenceSpan(
            doc_id, self._original(doc_id, position), self._original(doc_id, position + length - 1) + 1
        )

    def _starts(self, doc_id: str) -> tuple[list[int], list[int]]:
        """Where each word starts in the original text and in the normalised one, computed once per document."""
        if doc_id not in self._token_starts:
            original = [match.start() for match in _TOKEN.finditer(self.originals[doc_id])]
            words = self.normalised[doc_id].split(" ")
            self._token_starts[doc_id] = original, list(accumulate((len(w) + 1 for w in words[:-1]), initial=0))
        return self._token_starts[doc_id]

    def _original(self, doc_id: str, position: int) -> int:
        """Original offset of the non-space character at normalised `position`: the same place in the same word."""
        original, normalised = self._starts(doc_id)
        word = bisect_right(normalised, position) - 1
        return original[word] + position - normalised[word]
