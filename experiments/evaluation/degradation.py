"""The retrieval paths a question was answered without: a hybrid's path that failed or timed out is dropped for
that question (retriever.paths, pipelines/path_guards.py), and the run says how often."""

from __future__ import annotations

from collections.abc import Sequence

from experiments.evaluation.metric_registry import Direction, Layer, declare
from experiments.evaluation.question_record import QuestionRecord, mean_score

DEGRADED = declare(
    "retrieval/degraded", Layer.RETRIEVAL, Direction.NEITHER,
    "per question: 1 when a retrieval path was dropped (it failed or outlasted `retriever.paths.<path>.timeout_s`); "
    "per_question.jsonl names the paths under `degraded`",
)
DEGRADED_RATE = declare(
    "retrieval/degraded_rate", Layer.RETRIEVAL, Direction.LOWER,
    "the share of questions answered without one of the hybrid's retrieval paths "
    "([pipelines](pipelines.md#remote-embedders-and-degradation))",
)


def degraded_scores(paths: Sequence[str] | None) -> dict[str, float]:
    """A question's score: whether a path was dropped. A pipeline whose paths are not guarded (None) never drops
    one, and scores 0 too, so every job of a sweep logs the same retrieval metrics."""
    return {DEGRADED: float(bool(paths))}


def degraded_summary(records: Sequence[QuestionRecord]) -> dict[str, float]:
    """The share of questions with a dropped path."""
    rate = mean_score(records, DEGRADED)
    return {} if rate is None else {DEGRADED_RATE: rate}
