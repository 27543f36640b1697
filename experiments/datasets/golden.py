"""Golden-set loading: parse the golden JSONL strictly, then locate every evidence quote in the canonical texts.

A broken golden set silently skews every metric, so all problems are collected and raised together before
any run starts. Quotes are matched after whitespace normalisation (conversion may re-flow lines) and mapped
back to offsets in the original canonical text, which is what chunk spans refer to.

Unknown keys are problems too (a misnamed `answer` would otherwise leave every item unjudged): each one is
reported with the key it probably meant. Deliberate extra fields go to `GoldenItem.extra` when their key
starts with `x_` (`"x_owner": "hr"`) or when they are nested under `meta` (`"meta": {"owner": "hr"}`).

`"status": "candidate"` marks an item nobody has reviewed yet (`ragtune harvest` writes them from production
failures); absent or `"reviewed"`, it is reviewed. `load_golden` skips candidates unless told to include them, so an
unreviewed guess never moves a metric by accident.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import logging
import re
from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from pathlib import Path
from typing import Any

from haystack import Document

from components.routers.routes import CONVERSATIONAL, ROUTES
from pipelines.agent_tools import AGENT_TOOLS
from pipelines.errors import UserError

logger = logging.getLogger(__name__)
_WHITESPACE = re.compile(r"\s+")
_TOKEN = re.compile(r"\S+")
_QUOTE_PREVIEW = 80
_KNOWN_KEYS = frozenset(
    {
        "id",
        "question",
        "reference_answer",
        "evidence",
        "source",
        "relevant_doc_ids",
        "category",
        "history",
        "filters",
        "answerable",
        "route",
        "rows",
        "tools",
        "status",
    }
)
_EXTRA_PREFIX = "x_"
_REFERENCES = ("evidence", "relevant_doc_ids", "rows", "reference_answer")
# A table row an answer comes from, as the agent's sql_query tool cites it: sql:<table>/<primary key>.
ROW_ID = re.compile(r"sql:[A-Za-z_][A-Za-z0-9_]*/\S+")
HISTORY_ROLES = ("user", "assistant", "system")
_EXTRA_KEY = "meta"
CANDIDATE, REVIEWED = "candidate", "reviewed"
# Names other tools use for golden fields; checked (lower-cased) before difflib's spelling suggestions.
_ALIASES = {
    "answer": "reference_answer",
    "answers": "reference_answer",
    "expected_answer": "reference_answer",
    "gold_answer": "reference_answer",
    "ground_truth": "reference_answer",
    "ground_truths": "reference_answer",
    "context": "evidence",
    "contexts": "evidence",
    "evidences": "evidence",
    "quote": "evidence",
    "quotes": "evidence",
    "query": "question",
    "doc_ids": "relevant_doc_ids",
    "relevant_docs": "relevant_doc_ids",
    "relevant_ids": "relevant_doc_ids",
    "doc_id": "source",
    "document": "source",
    "qid": "id",
    "_id": "id",
    "question_id": "id",
    "messages": "history",
    "chat_history": "history",
    "unanswerable": "answerable",
}


@dataclass(frozen=True)
class EvidenceSpan:
    """One location of a quote: half-open [start, end) in the canonical text of `doc_id`."""

    doc_id: str
    start: int
    end: int


@dataclass(frozen=True)
class GoldenItem:
    """One golden question; `evidence_spans[i]` holds every location of `evidence[i]` once located.

    `answerable=None` means "derive it": true when evidence, relevant_doc_ids or reference_answer is non-empty.
    """

    id: str
    question: str
    reference_answer: str | None = None
    evidence: tuple[str, ...] = ()
    source: str | None = None
    relevant_doc_ids: tuple[str, ...] = ()
    category: str | None = None
    # Earlier chat turns, {"role": "user" | "assistant", "content": ...}; the question is the next user turn.
    history: tuple[dict, ...] = ()
    # A Haystack metadata filter the retrievers apply for this question (e.g. a tenant or a product line).
    filters: dict | None = None
    answerable: bool | None = None
    # The route an adaptive pipeline should take (components.routers.routes.ROUTES); scored as router/accuracy.
    route: str | None = None
    # Table rows the answer comes from (sql:<table>/<key>): evidence units next to the quotes, for pipeline=agentic.
    rows: tuple[str, ...] = ()
    # The tools an agent should call, in order (kb_search, sql_query); scored as agent/tool_choice_accuracy.
    tools: tuple[str, ...] = ()
    # `"status": "candidate"`: not reviewed yet, skipped unless the loader includes candidates.
    candidate: bool = False
    evidence_spans: tuple[tuple[EvidenceSpan, ...], ...] = ()
    extra: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.answerable is None:
            derived = bool(self.evidence or self.relevant_doc_ids or self.rows or self.reference_answer)
            object.__setattr__(self, "answerable", derived)


class GoldenError(UserError, ValueError):
    """Every problem of a golden set, one per line, each naming file:line and id."""

    def __init__(self, origin: str, problems: Sequence[str]) -> None:
        self.problems = tuple(problems)
        super().__init__(
            f"golden set {origin}: {len(self.problems)} problem(s)\n"
            + "\n".join(f"  {p}" for p in self.problems)
        )


def normalise_whitespace(text: str) -> str:
    """Every run of whitespace becomes one space, ends stripped: the form quotes are matched in."""
    return _WHITESPACE.sub(" ", text).strip()


def parse_golden(lines: Iterable[str], origin: str) -> list[GoldenItem]:
    """Items of a golden JSONL (quotes not located yet); raises GoldenError listing every problem."""
    parsed, problems = _parse(lines, origin)
    if problems:
        raise GoldenError(origin, problems)
    return [item for _, item in parsed]


def parse_golden_file(path: str | Path) -> list[tuple[int, GoldenItem]]:
    """(line number, item) for every item of the golden JSONL at `path`, candidates included (quotes not located);
    raises GoldenError listing every problem."""
    origin = str(path)
    parsed, problems = _parse_file(path)
    if problems:
        raise GoldenError(origin, problems)
    return parsed


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
    parsed, problems = _parse_file(path)
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


# --- parsing -------------------------------------------------------------------------------------------------


def locate_each(items: Sequence[GoldenItem], documents: Sequence[Document]) -> list[GoldenItem | None]:
    """Each item with its quotes located, or None where a quote (or its source) is not in `documents`: for sets
    that drop what cannot be found (experiments/datasets/testset.py) instead of stopping."""
    located, _ = _locate(items, [item.id for item in items], documents, {})
    by_id = {item.id: item for item in located}
    return [
        found if (found := by_id.get(item.id)) is not None and all(found.evidence_spans) else None for item in items
    ]


def _parse_file(path: str | Path) -> tuple[list[tuple[int, GoldenItem]], list[str]]:
    origin = str(path)
    try:
        with Path(path).open(encoding="utf-8-sig") as handle:
            return _parse(handle, origin)
    except UnicodeDecodeError as e:
        return [], [f"{origin}: not UTF-8 text ({e.reason} at byte {e.start})"]


def _parse(lines: Iterable[str], origin: str) -> tuple[list[tuple[int, GoldenItem]], list[str]]:
    """(line number, item) for every valid line, plus one message per problem."""
    parsed: list[tuple[int, GoldenItem]] = []
    problems: list[str] = []
    first_line: dict[str, int] = {}
    judgeable = False
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            problems.append(f"{origin}:{number}: not valid JSON: {exc}")
            continue
        if not isinstance(record, dict):
            problems.append(f"{origin}:{number}: expected a JSON object, got {type(record).__name__}")
            continue
        item, item_problems = _item(record, f"{origin}:{number}")
        problems += item_problems
        if item is None:
            continue
        if item.id in first_line:
            problems.append(
                f"{origin}:{number} (id={item.id}): duplicate id, first used on line {first_line[item.id]}"
            )
            continue
        first_line[item.id] = number
        parsed.append((number, item))
        judgeable = judgeable or _judgeable(record)
    if parsed and not problems and not judgeable:  # other problems may hide the items that can be judged
        problems.append(
            f"{origin}: no item can be judged: none has 'evidence', 'relevant_doc_ids', 'rows' or "
            "'reference_answer', and none is marked \"answerable\": false"
        )
    return parsed, problems


def _judgeable(record: Mapping[str, Any]) -> bool:
    """Some metric can score the item: it has a reference, or is marked unanswerable (refusal is scored)."""
    return any(record.get(key) for key in _REFERENCES) or record.get("answerable") is False


def _item(record: dict[str, Any], where: str) -> tuple[GoldenItem | None, list[str]]:
    """One record as a GoldenItem, or None plus the reasons it is not one; null counts as absent."""
    values = {key: value for key, value in record.items() if value is not None}
    problems: list[str] = []
    raw_id = values.get("id")
    if isinstance(raw_id, int) and not isinstance(raw_id, bool):
        raw_id = str(raw_id)
    item_id = raw_id if isinstance(raw_id, str) and raw_id.strip() else None
    label = f"{where} (id={item_id if item_id is not None else '?'})"
    problems += [f"{label}: {_unknown_key(key)}" for key in record if not _is_allowed_key(key)]
    if item_id is None:
        problems.append(f"{label}: 'id' is missing or not a non-empty string/integer")
    question = values.get("question")
    if not (isinstance(question, str) and question.strip()):
        problems.append(f"{label}: 'question' is missing or empty")
    if isinstance(values.get("evidence"), str):
        values["evidence"] = [values["evidence"]]
    for key, ok, expected in (
        ("reference_answer", lambda v: isinstance(v, str), "a string"),
        ("source", lambda v: isinstance(v, str), "a string"),
        ("category", lambda v: isinstance(v, str), "a string"),
        ("evidence", lambda v: _is_list_of(v, str), "a string or a list of strings"),
        ("relevant_doc_ids", lambda v: _is_list_of(v, str), "a list of strings"),
        ("history", _is_turns, 'a list of {"role": "user" or "assistant", "content": "..."} turns'),
        ("filters", lambda v: isinstance(v, dict), "an object (a Haystack metadata filter)"),
        ("answerable", lambda v: isinstance(v, bool), "true or false"),
        ("route", lambda v: v in ROUTES, f"one of {', '.join(ROUTES)}"),
        ("rows", lambda v: _is_list_of(v, str) and all(ROW_ID.fullmatch(r) for r in v), "a list of sql:<table>/<key>"),
        ("tools", lambda v: _is_list_of(v, str) and set(v) <= set(AGENT_TOOLS), f"a list of {', '.join(AGENT_TOOLS)}"),
        (_EXTRA_KEY, lambda v: isinstance(v, dict), "an object"),
        ("status", lambda v: v in (CANDIDATE, REVIEWED), f"{CANDIDATE!r} or {REVIEWED!r} (absent: reviewed)"),
    ):
        if key in values and not ok(values[key]):
            problems.append(
                f"{label}: {key!r} must be {expected}, got {json.dumps(record[key], ensure_ascii=False)}"
            )
    if _is_list_of(values.get("evidence"), str) and not all(
        normalise_whitespace(q) for q in values["evidence"]
    ):
        problems.append(f"{label}: 'evidence' holds an empty quote")
    if values.get("route") in CONVERSATIONAL and any(values.get(key) for key in _REFERENCES):
        problems.append(f"{label}: route {values['route']!r} retrieves nothing, so the item cannot have {list(_REFERENCES)}")
    if problems:
        return None, problems
    item = GoldenItem(
        id=item_id,
        question=question,
        reference_answer=values.get("reference_answer"),
        evidence=tuple(values.get("evidence", ())),
        source=values.get("source"),
        relevant_doc_ids=tuple(values.get("relevant_doc_ids", ())),
        category=values.get("category"),
        history=tuple(values.get("history", ())),
        filters=values.get("filters"),
        answerable=values.get("answerable"),
        route=values.get("route"),
        rows=tuple(values.get("rows", ())),
        tools=tuple(values.get("tools", ())),
        candidate=values.get("status") == CANDIDATE,
        extra={key: value for key, value in record.items() if key not in _KNOWN_KEYS},
    )
    return item, []


def _is_allowed_key(key: str) -> bool:
    return key in _KNOWN_KEYS or key == _EXTRA_KEY or key.startswith(_EXTRA_PREFIX)


def _unknown_key(key: str) -> str:
    """The problem text for `key`, with the known key it most likely meant."""
    guess = _ALIASES.get(key.lower()) or next(
        iter(difflib.get_close_matches(key.lower(), sorted(_KNOWN_KEYS), n=1)), None
    )
    if guess is not None:
        return f"unknown key {key!r}; did you mean {guess!r}?"
    return (
        f"unknown key {key!r}; known keys: {', '.join(sorted(_KNOWN_KEYS))} "
        f"(nest extra fields under {_EXTRA_KEY!r} or prefix them with {_EXTRA_PREFIX!r})"
    )


def _is_turns(value: object) -> bool:
    return _is_list_of(value, dict) and all(
        turn.get("role") in HISTORY_ROLES and isinstance(turn.get("content"), str) for turn in value  # type: ignore[union-attr]
    )


def _is_list_of(value: object, kind: type) -> bool:
    return isinstance(value, list) and all(isinstance(v, kind) for v in value)


# --- locating ------------------------------------------------------------------------------------------------


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
