"""The query layer: what a rewriter did to each question, and whether the facts of the question survived it.

A rewriter (the pipeline's `question_from` component) gives `question` (the query the retrievers get) and, where
it has them, `queries` (every rewrite it made; empty when it left the question alone) and `fallback` (its output
could not be used and the original question went on). A pass-through (`rewriter=none`) makes no rewrites.
An expander (the `queries_from` component, e.g. Haystack's QueryExpander) gives only `queries`, the question
usually among them; the others are its rewrites, and an expander that made none fell back.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from experiments.datasets.golden.items import GoldenItem
from experiments.evaluation.metric_registry import Direction, Layer, declare
from experiments.evaluation.question_record import QuestionRecord

# Numbers and anything holding a digit (20, $310, P2, SEV3, 2023-04), acronyms and ids (HR, VPN, MFA),
# and capitalised words inside a sentence (Northwind, London): the facts a rewrite must not lose.
_KEY_TOKEN = re.compile(r"[\w$€¥£.%-]*\d[\w.%-]*|\b[A-Z]{2,}[\w-]*\b|(?<=[a-z,;:] )[A-Z][a-z]+\b")

REWRITES_PER_QUESTION = declare(
    "query/rewrites_per_question", Layer.QUERY, Direction.NEITHER,
    "with a rewriter: rewrites made per question (those differing from the question)",
)
REWRITTEN_SHARE = declare(
    "query/rewritten_share", Layer.QUERY, Direction.NEITHER, "the share of questions rewritten"
)
FALLBACKS = declare(
    "query/fallbacks", Layer.QUERY, Direction.LOWER,
    "questions that fell back to the question alone (the rewriter's output could not be used, or an "
    "expander made no rewrite)",
)
FIDELITY = declare(
    "query/fidelity", Layer.QUERY, Direction.HIGHER,
    "the share of the key tokens (entities, numbers, ids) of the question and the user's earlier turns "
    "that the rewrites keep, over rewritten questions",
)
QUERY = (REWRITES_PER_QUESTION, REWRITTEN_SHARE, FALLBACKS, FIDELITY)
REWRITES = declare("query/rewrites", Layer.QUERY, Direction.NEITHER, "per question: the rewrites made")
REWRITTEN = declare("query/rewritten", Layer.QUERY, Direction.NEITHER, "per question: 1 when rewritten")
FALLBACK = declare("query/fallback", Layer.QUERY, Direction.NEITHER, "per question: 1 when it fell back")


def key_tokens(text: str) -> set[str]:
    """Entities, numbers and ids of `text`, lowercased; trailing sentence punctuation is not part of them."""
    return {token.strip(".").lower() for token in _KEY_TOKEN.findall(text) if token.strip(".")}


def query_scores(item: GoldenItem, outputs: Mapping[str, Any]) -> dict[str, float]:
    """Per question: rewrites made, whether it fell back, and (when rewritten) the fidelity of the rewrites.

    Fidelity is the share of key tokens of the question and of the user's earlier turns found in the rewrites.
    """
    asked = item.question.strip().lower()
    rewrites = [q for q in outputs.get("queries") or [] if isinstance(q, str) and q.strip().lower() != asked]
    expander = "question" not in outputs
    scores = {
        REWRITES: float(len(rewrites)),
        REWRITTEN: float(bool(rewrites)),
        FALLBACK: float(bool(outputs.get("fallback")) or (expander and not rewrites)),
    }
    expected = key_tokens(item.question)
    for turn in item.history:
        if turn.get("role") == "user":
            expected |= key_tokens(turn.get("content", ""))
    if rewrites and expected:
        found = key_tokens(" ".join(rewrites)) | {t for t in expected if any(t in r.lower() for r in rewrites)}
        scores[FIDELITY] = len(expected & found) / len(expected)
    return scores


def query_summary(records: Sequence[QuestionRecord]) -> dict[str, float]:
    """Run-level query metrics; empty for a pipeline without a rewriter."""
    rows = [r.scores for r in records if REWRITES in r.scores]
    if not rows:
        return {}
    fidelity = [float(r[FIDELITY]) for r in rows if r.get(FIDELITY) is not None]
    values = (
        sum(float(r[REWRITES]) for r in rows) / len(rows),
        sum(float(r[REWRITTEN]) for r in rows) / len(rows),
        float(sum(float(r[FALLBACK]) for r in rows)),
        sum(fidelity) / len(fidelity) if fidelity else None,
    )
    return {name: value for name, value in zip(QUERY, values, strict=True) if value is not None}
