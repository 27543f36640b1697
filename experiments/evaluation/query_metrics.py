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
from experiments.evaluation import metric_names
from experiments.evaluation.question_record import QuestionRecord

# Numbers and anything holding a digit (20, $310, P2, SEV3, 2023-04), acronyms and ids (HR, VPN, MFA),
# and capitalised words inside a sentence (Northwind, London): the facts a rewrite must not lose.
_KEY_TOKEN = re.compile(r"[\w$€¥£.%-]*\d[\w.%-]*|\b[A-Z]{2,}[\w-]*\b|(?<=[a-z,;:] )[A-Z][a-z]+\b")


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
        "query/rewrites": float(len(rewrites)),
        "query/rewritten": float(bool(rewrites)),
        "query/fallback": float(bool(outputs.get("fallback")) or (expander and not rewrites)),
    }
    expected = key_tokens(item.question)
    for turn in item.history:
        if turn.get("role") == "user":
            expected |= key_tokens(turn.get("content", ""))
    if rewrites and expected:
        found = key_tokens(" ".join(rewrites)) | {t for t in expected if any(t in r.lower() for r in rewrites)}
        scores["query/fidelity"] = len(expected & found) / len(expected)
    return scores


def query_summary(records: Sequence[QuestionRecord]) -> dict[str, float]:
    """Run-level query metrics; empty for a pipeline without a rewriter."""
    rows = [r.scores for r in records if "query/rewrites" in r.scores]
    if not rows:
        return {}
    fidelity = [float(r["query/fidelity"]) for r in rows if r.get("query/fidelity") is not None]
    values = (
        sum(float(r["query/rewrites"]) for r in rows) / len(rows),
        sum(float(r["query/rewritten"]) for r in rows) / len(rows),
        float(sum(float(r["query/fallback"]) for r in rows)),
        sum(fidelity) / len(fidelity) if fidelity else None,
    )
    return {name: value for name, value in zip(metric_names.QUERY, values, strict=True) if value is not None}
