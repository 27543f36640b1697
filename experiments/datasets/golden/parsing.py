"""The golden JSONL parsed strictly: every line checked, every problem collected, quotes not located yet.

Unknown keys are problems too (a misnamed `answer` would otherwise leave every item unjudged): each one is
reported with the key it probably meant. Deliberate extra fields go to `GoldenItem.extra` when their key
starts with `x_` (`"x_owner": "hr"`) or when they are nested under `meta` (`"meta": {"owner": "hr"}`).
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from components.routers.routes import CONVERSATIONAL, ROUTES
from experiments.datasets.golden.items import (
    CANDIDATE,
    REVIEWED,
    ROW_ID,
    GoldenError,
    GoldenItem,
    normalise_whitespace,
)
from pipelines.agent_tools import AGENT_TOOLS

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
HISTORY_ROLES = ("user", "assistant", "system")
_EXTRA_KEY = "meta"
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
    parsed, problems = read_golden(path)
    if problems:
        raise GoldenError(origin, problems)
    return parsed


def read_golden(path: str | Path) -> tuple[list[tuple[int, GoldenItem]], list[str]]:
    """(line number, item) for every valid item of the golden JSONL at `path`, plus one message per problem, for a
    caller that adds problems of its own before raising them all (evidence.load_golden)."""
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
