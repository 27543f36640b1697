"""One golden question's outcome, as `evaluate()` hands it on: a line of a run's per_question.jsonl, and what the
diagnosis, the paired comparison and the gate read back.

The JSON form stays flat (one key per metric, `<view>/chunks` per ranking), so that runs logged before this type
existed read back the same: `from_json(to_json(r)) == r` for every record.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

ANSWER_FIELDS = ("answer", "refused", "citations", "unsupported_sentences")
ROUTE_FIELDS = ("expected_route", "route", "rewritten_question", "rewritten_queries")
CHUNKS_SUFFIX = "/chunks"


@dataclass(frozen=True)
class QuestionRecord:
    id: str
    question: str
    category: str
    answerable: bool | None
    latency_ms: float
    layer: str  # the first broken layer (experiments/evaluation/diagnosis.py), or "ok"
    reference: str | None = None
    # What the pipeline answered (pipelines/answer_contract.answer_fields); empty for a retrieval-only pipeline.
    answer: Mapping[str, Any] = field(default_factory=dict)
    # Every per-question score by its logged name: "retrieval/mrr_at_10", "answer/f1", "cost/llm_calls", ...
    scores: Mapping[str, float | bool | None] = field(default_factory=dict)
    # Each view's ranking ("retrieval", "context", "stage/bm25"): [{"id", "doc_id", "score"}], best first.
    chunks: Mapping[str, list[dict[str, Any]]] = field(default_factory=dict)
    # The route it was expected to take and took, and the rewrite it was searched with.
    routing: Mapping[str, Any] = field(default_factory=dict)
    # What a grader or a judge added: crag_label, crag_scores, crag_grades, judge_errors.
    extras: Mapping[str, Any] = field(default_factory=dict)

    def score(self, name: str) -> float | None:
        """A numeric per-question value by name (`latency_ms` included), None where it was not logged."""
        value = self.latency_ms if name == "latency_ms" else self.scores.get(name)
        return None if isinstance(value, bool) or value is None else float(value)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "question": self.question,
            "category": self.category,
            "answerable": self.answerable,
            "latency_ms": self.latency_ms,
            "reference": self.reference,
            **self.answer,
            **{f"{view}{CHUNKS_SUFFIX}": ranked for view, ranked in self.chunks.items()},
            **self.scores,
            "layer": self.layer,
            **self.extras,
            **self.routing,
        }

    @classmethod
    def from_json(cls, row: Mapping[str, Any]) -> QuestionRecord:
        fixed = ("id", "question", "category", "answerable", "latency_ms", "reference", "layer")
        rest = {key: value for key, value in row.items() if key not in fixed}
        chunks = {k.removesuffix(CHUNKS_SUFFIX): v for k, v in rest.items() if k.endswith(CHUNKS_SUFFIX)}
        scores = {k: v for k, v in rest.items() if "/" in k and not k.endswith(CHUNKS_SUFFIX) and _is_score(v)}
        claimed = {*ANSWER_FIELDS, *ROUTE_FIELDS, *(f"{view}{CHUNKS_SUFFIX}" for view in chunks)}
        return cls(
            id=str(row["id"]),
            question=row["question"],
            category=row.get("category") or "none",
            answerable=row.get("answerable"),
            latency_ms=float(row.get("latency_ms", 0.0)),
            layer=row.get("layer", "ok"),
            reference=row.get("reference"),
            answer={k: rest[k] for k in ANSWER_FIELDS if k in rest},
            scores=scores,
            chunks=chunks,
            routing={k: rest[k] for k in ROUTE_FIELDS if k in rest},
            extras={k: v for k, v in rest.items() if k not in claimed and k not in scores},
        )


def score_values(records: Sequence[QuestionRecord], name: str) -> list[float]:
    """`name`'s score of every question that has one."""
    return [value for record in records if (value := record.score(name)) is not None]


def mean_score(records: Sequence[QuestionRecord], name: str) -> float | None:
    """The mean of `name` over the questions that have it; None when none does."""
    values = score_values(records, name)
    return float(np.mean(values)) if values else None


def _is_score(value: Any) -> bool:
    return value is None or isinstance(value, int | float)
