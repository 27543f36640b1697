"""The grading layer: the label a retrieval evaluator (CRAG) gave each question, against its answerability.

An answerable question should be graded correct or ambiguous, an unanswerable one incorrect: that is
`crag/label_accuracy` (over the questions that retrieve: a greeting has no passages worth grading). The per-passage scores are kept per question, so `experiments.tuning.calibrate` and a reader of
per_question.jsonl see why a label was given.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from components.crag.crag_evaluator import LABELS
from components.routers.routes import CONVERSATIONAL
from experiments.evaluation.metric_registry import Direction, Layer, declare
from experiments.evaluation.question_record import QuestionRecord

LABEL_ACCURACY = declare(
    "crag/label_accuracy", Layer.GRADING, Direction.HIGHER,
    "`pipeline=crag`: an answerable question graded correct or ambiguous, an unanswerable one incorrect, "
    "over the questions that retrieve",
)
declare(
    "crag/label_{" + ",".join(LABELS) + "}_rate", Layer.GRADING, Direction.NEITHER,
    "the share of those questions given each label",
)


def grading_record(outputs: Mapping[str, Any]) -> dict[str, Any]:
    """The grader's label and its graded passages' scores and grades, best first."""
    graded = outputs.get("graded") or []
    return {
        "crag_label": outputs.get("label"),
        "crag_scores": [round(float(d.meta["crag_score"]), 4) for d in graded],
        "crag_grades": [d.meta["crag_grade"] for d in graded],
    }


def grading_summary(records: Sequence[QuestionRecord]) -> dict[str, float]:
    rows = [r for r in records if r.extras.get("crag_label") and r.routing.get("expected_route") not in CONVERSATIONAL]
    if not rows:
        return {}
    labels = [r.extras["crag_label"] for r in rows]
    metrics = {f"crag/label_{label}_rate": labels.count(label) / len(rows) for label in LABELS}
    right = [(label == "incorrect") != bool(r.answerable) for r, label in zip(rows, labels, strict=True)]
    metrics[LABEL_ACCURACY] = sum(right) / len(rows)
    return metrics
