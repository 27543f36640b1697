"""POST /feedback: a user's rating of a reply, stored as an MLflow assessment on that reply's trace.

Only the principal that asked may rate a request: another principal's trace id and an unknown one get the same
404. A comment and a correct answer are users' free text, so they are kept as serve.trace.content keeps the
questions (full, hashed under `redacted`, dropped under `none`). Rating again replaces the earlier rating.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Literal

import mlflow
from mlflow.entities import AssessmentSource
from pydantic import BaseModel, Field, model_validator

from serving.online.traces import OWNERS_KEPT, Traces, identity
from serving.principals import Principal

FEEDBACK_NAME = "user_rating"
# Longest comment and correct answer, in characters.
MAX_TEXT_CHARS = 4000
UNKNOWN = "unknown trace_id"


class FeedbackRequest(BaseModel):
    """A rating of one reply: 1 (up) or -1 (down), or 1 to 5 with `scale: 5`."""

    trace_id: str = Field(max_length=64)
    rating: int
    scale: Literal[2, 5] = 2
    comment: str | None = Field(default=None, max_length=MAX_TEXT_CHARS)
    correct_answer: str | None = Field(default=None, max_length=MAX_TEXT_CHARS)

    @model_validator(mode="after")
    def _rating_on_scale(self) -> FeedbackRequest:
        allowed = (1, -1) if self.scale == 2 else (1, 2, 3, 4, 5)
        if self.rating not in allowed:
            raise ValueError(f"rating must be one of {list(allowed)} with scale {self.scale}")
        return self


class FeedbackReply(BaseModel):
    trace_id: str
    status: Literal["accepted"] = "accepted"


class Ratings:
    """Writes ratings through the traces' queue, replacing a trace's earlier rating."""

    def __init__(self, traces: Traces) -> None:
        self.traces = traces
        self._earlier: OrderedDict[str, str] = OrderedDict()  # trace id -> its rating's assessment id
        self._lock = threading.Lock()

    def accept(self, body: FeedbackRequest, principal: Principal | None) -> bool | None:
        """None: not this principal's trace (or not a known one); False: the queue is full; True: queued."""
        if not self.traces.owners.owns(body.trace_id, principal):
            return None
        return self.traces.submit(lambda: self._write(body, principal))

    def _write(self, body: FeedbackRequest, principal: Principal | None) -> None:
        shown = self.traces.shown
        texts = {"comment": body.comment, "correct_answer": body.correct_answer}
        kept = {k: shown(v) if shown else None for k, v in texts.items() if v is not None}
        metadata = {"scale": str(body.scale)} | {k: str(v) for k, v in kept.items() if v is not None}
        with self._lock:
            earlier = self._earlier.get(body.trace_id)
        if earlier is not None:
            mlflow.delete_assessment(trace_id=body.trace_id, assessment_id=earlier)
        written = mlflow.log_feedback(
            # the comment as the rationale too: the MLflow UI shows a rating's rationale, not its metadata
            trace_id=body.trace_id, name=FEEDBACK_NAME, value=body.rating, metadata=metadata,
            rationale=metadata.get("comment"),
            source=AssessmentSource(source_type="HUMAN", source_id=identity(principal)),
        )
        with self._lock:
            self._earlier[body.trace_id] = written.assessment_id
            while len(self._earlier) > OWNERS_KEPT:
                self._earlier.popitem(last=False)
