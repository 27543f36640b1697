"""Per-question MLflow traces: the run's Traces tab shows what each pipeline stage of a sampled question did.

Haystack's OpenTelemetry tracer (`opentelemetry-haystack`) feeds `mlflow.haystack.autolog()`. Haystack keeps one
active tracer, evaluation's component timer, so the timer forwards its spans to MLflow's tracer only around the
sampled questions' pipeline runs; the others cost nothing. Each trace is tagged with its question id once the
traces are flushed.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

import mlflow
import numpy as np
from haystack import tracing

from experiments.tracing import ComponentTimer

QUESTION_TAG = "ragtune.question_id"
logger = logging.getLogger(__name__)


def sampled_indices(sample: int, total: int) -> set[int]:
    """`sample` question positions spread evenly over `total` (all of them when sample >= total)."""
    if sample <= 0 or total <= 0:
        return set()
    return {int(i) for i in np.linspace(0, total - 1, min(sample, total)).round()}


class QuestionTraces:
    """Traces the pipeline runs of sampled questions into the active MLflow run."""

    def __init__(self, sample: int, total: int, timer: ComponentTimer) -> None:
        self.indices = sampled_indices(sample, total) if mlflow.active_run() is not None else set()
        self.trace_ids: dict[str, str] = {}
        self.timer = timer
        self._mlflow_tracer: Any = None
        self._content = False

    def __enter__(self) -> QuestionTraces:
        if self.indices:
            active, self._content = tracing.tracer.actual_tracer, tracing.tracer.is_content_tracing_enabled
            mlflow.haystack.autolog(silent=True)  # makes MLflow's tracer the active one, with content tracing on
            self._mlflow_tracer = tracing.tracer.actual_tracer
            tracing.enable_tracing(active)
            tracing.tracer.is_content_tracing_enabled = self._content  # inputs and outputs recorded when traced only
        return self

    @contextlib.contextmanager
    def question(self, index: int, question_id: str) -> Iterator[None]:
        """Traces the block when question `index` is sampled."""
        if index not in self.indices:
            yield
            return
        before = mlflow.get_last_active_trace_id()
        self.timer.forward = self._mlflow_tracer
        tracing.tracer.is_content_tracing_enabled = True
        try:
            yield
        finally:
            self.timer.forward = None
            tracing.tracer.is_content_tracing_enabled = self._content
            trace_id = mlflow.get_last_active_trace_id()
            if trace_id and trace_id != before:
                self.trace_ids[question_id] = trace_id

    def __exit__(self, *exc: object) -> None:
        if not self.indices:
            return
        mlflow.haystack.autolog(disable=True)
        tracing.tracer.is_content_tracing_enabled = self._content
        try:
            mlflow.flush_trace_async_logging()
            client = mlflow.MlflowClient()
            for question_id, trace_id in self.trace_ids.items():
                client.set_trace_tag(trace_id, QUESTION_TAG, question_id)
        except Exception as error:  # the traces are a debugging aid: losing their tags must not fail a finished run
            logger.warning("MLflow traces: tagging with question ids failed (%s); the traces stay untagged", error)
