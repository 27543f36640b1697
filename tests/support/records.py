"""Per-question records for tests of the run-level summaries, written as per_question.jsonl lines are."""

from collections.abc import Mapping
from typing import Any

from experiments.evaluation.question_record import QuestionRecord


def record(line: Mapping[str, Any]) -> QuestionRecord:
    """A QuestionRecord from the fields of a per_question.jsonl line; `id` and `question` may be left out."""
    return QuestionRecord.from_json({"id": "q", "question": "?", **line})
