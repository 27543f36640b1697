"""Per-question MLflow traces: the run's Traces tab shows what each pipeline stage of a sampled question did.

Haystack keeps one active tracer, evaluation's component timer, so the timer forwards its spans to `MlflowTracer`
only around the sampled questions' pipeline runs; the others cost nothing. `MlflowTracer` writes Haystack's spans
straight into MLflow spans (`mlflow.start_span`): one per pipeline run and one per component run, named after the
component, with its inputs and outputs made `lean` (ids, scores, spans and the start of each text) unless
`eval.trace_full`. Each trace is tagged with its question id once the traces are flushed.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import mlflow
import numpy as np
from haystack import tracing
from haystack.tracing import Span, Tracer
from mlflow.entities import LiveSpan, SpanType

from pipelines.instrumentation import COMPONENT_NAME, COMPONENT_RUN, ComponentTimer, lean
from pipelines.run_layout import QUESTION_TAG

INPUTS = ("haystack.component.input", "haystack.pipeline.input_data", "haystack.agent.input",
          "haystack.agent.step.llm.input", "haystack.agent.step.tool.input")
OUTPUTS = ("haystack.component.output", "haystack.pipeline.output_data", "haystack.agent.output",
           "haystack.agent.step.llm.output", "haystack.agent.step.tool.output")
# An Agent's spans: each step's model call (its messages in, its reply with the tool call and tokens out) and tool run.
AGENT_SPAN_TYPES = {"haystack.agent.step.llm": SpanType.CHAT_MODEL, "haystack.agent.step.tool": SpanType.TOOL}
# MLflow span types by what a component's class name says it is.
SPAN_TYPES = {"Retriever": SpanType.RETRIEVER, "Embedder": SpanType.EMBEDDING, "Ranker": SpanType.RERANKER,
              "Generator": SpanType.CHAT_MODEL, "Agent": SpanType.AGENT, "Router": SpanType.CHAIN}
logger = logging.getLogger(__name__)


def sampled_indices(sample: int, total: int) -> set[int]:
    """`sample` question positions spread evenly over `total` (all of them when sample >= total)."""
    if sample <= 0 or total <= 0:
        return set()
    return {int(i) for i in np.linspace(0, total - 1, min(sample, total)).round()}


class _MlflowSpan(Span):
    def __init__(self, live: LiveSpan, shown: Callable[[Any], Any]) -> None:
        self.live, self.shown = live, shown

    def set_tag(self, key: str, value: Any) -> None:
        if key in INPUTS:
            self.live.set_inputs(self.shown(value))
        elif key in OUTPUTS:
            self.live.set_outputs(self.shown(value))
        elif isinstance(value, str | int | float | bool):
            self.live.set_attribute(key, value)

    def raw_span(self) -> Any:
        return self.live


class DeferredEnds:
    """The spans of a request whose ends wait for the trace writer. Ending an MLflow span exports it to the store,
    and the request thread must never wait on the store: it starts its spans (in memory) and records when each
    ended; the writer ends them at those times, then the root."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: dict[int, LiveSpan] = {}
        self._ended: list[tuple[LiveSpan, int | None]] = []
        self._closed = False

    def opened(self, live: LiveSpan) -> None:
        with self._lock:
            if not self._closed:
                self._open[id(live)] = live

    def ended(self, live: LiveSpan) -> None:
        at = time.time_ns()
        with self._lock:
            if not self._closed:
                self._open.pop(id(live), None)
                self._ended.append((live, at))

    def close(self) -> list[tuple[LiveSpan, int | None]]:
        """The spans to end, each with its end time; a span still open (a timed-out request's pipeline runs on) ends
        when the writer ends it, marked as an error. Spans that end later are not recorded."""
        with self._lock:
            self._closed = True
            return [*self._ended, *((live, None) for live in self._open.values())]


def end_spans(spans: list[tuple[LiveSpan, int | None]]) -> None:
    """Ends (and so exports) what DeferredEnds.close returned, in the order the spans ended."""
    for live, at in spans:
        if at is None:
            live.set_status("ERROR")
        live.end(end_time_ns=at)


class MlflowTracer(Tracer):
    """Haystack's spans as MLflow spans of the current trace (a new trace when none is open), or under `root`: a
    span its caller opened and ends (serve.py's request spans, ended by the trace writer off the request path, which
    also ends the spans under it: `deferred`). `shown` makes what the spans keep of a value
    (serving.online.traces redacts it); default `lean`, or as is with `full`."""

    def __init__(
        self, full: bool = False, root: LiveSpan | None = None, shown: Callable[[Any], Any] | None = None
    ) -> None:
        self.root = root
        self.shown = shown or ((lambda value: value) if full else lean)
        self.deferred = DeferredEnds() if root is not None else None
        self._current: list[_MlflowSpan] = []

    @contextlib.contextmanager
    def trace(
        self, operation_name: str, tags: dict[str, Any] | None = None, parent_span: Span | None = None
    ) -> Iterator[Span]:
        tags = tags or {}
        kind = str(tags.get("haystack.component.type", ""))
        name = str(tags.get(COMPONENT_NAME, operation_name)) if operation_name == COMPONENT_RUN else operation_name
        span_type = AGENT_SPAN_TYPES.get(operation_name) or next(
            (t for suffix, t in SPAN_TYPES.items() if kind.endswith(suffix)),
            SpanType.CHAIN if operation_name != COMPONENT_RUN else SpanType.UNKNOWN,
        )
        parent = self._current[-1].live if self._current else self.root
        opened = (mlflow.start_span(name=name, span_type=span_type) if parent is None
                  else _child(parent, name, span_type, self.deferred))
        with opened as live:
            span = _MlflowSpan(live, self.shown)
            for key, value in tags.items():
                span.set_tag(key, value)
            self._current.append(span)
            try:
                yield span
            finally:
                self._current.pop()

    def current_span(self) -> Span | None:
        return self._current[-1] if self._current else None


@contextlib.contextmanager
def _child(parent: LiveSpan, name: str, span_type: str, deferred: DeferredEnds | None) -> Iterator[LiveSpan]:
    """A span under `parent`, outside MLflow's context: its request thread is not the one that ends the trace.
    With `deferred`, its end is left to the trace writer."""
    live = mlflow.start_span_no_context(name=name, span_type=span_type, parent_span=parent)
    if deferred is not None:
        deferred.opened(live)
    try:
        yield live
    except BaseException:
        live.set_status("ERROR")
        raise
    finally:
        if deferred is None:
            live.end()
        else:
            deferred.ended(live)


class QuestionTraces:
    """Traces the pipeline runs of sampled questions into the active MLflow run."""

    def __init__(self, sample: int, total: int, timer: ComponentTimer, full: bool = False) -> None:
        self.indices = sampled_indices(sample, total) if mlflow.active_run() is not None else set()
        self.trace_ids: dict[str, str] = {}
        self.timer = timer
        self.tracer = MlflowTracer(full)
        self._content = False

    def __enter__(self) -> QuestionTraces:
        self._content = tracing.tracer.is_content_tracing_enabled
        return self

    @contextlib.contextmanager
    def question(self, index: int, question_id: str) -> Iterator[None]:
        """Traces the block when question `index` is sampled."""
        if index not in self.indices:
            yield
            return
        before = mlflow.get_last_active_trace_id()
        self.timer.forward = self.tracer
        tracing.tracer.is_content_tracing_enabled = True  # Haystack hands components' inputs and outputs over
        try:
            yield
        finally:
            self.timer.forward = None
            tracing.tracer.is_content_tracing_enabled = self._content
            trace_id = mlflow.get_last_active_trace_id()
            if trace_id and trace_id != before:
                self.trace_ids[question_id] = trace_id

    def __exit__(self, *exc: object) -> None:
        if not self.trace_ids:
            return
        try:
            mlflow.flush_trace_async_logging()
            client = mlflow.MlflowClient()
            for question_id, trace_id in self.trace_ids.items():
                client.set_trace_tag(trace_id, QUESTION_TAG, question_id)
        except Exception as error:  # the traces are a debugging aid: losing their tags must not fail a finished run
            logger.warning("MLflow traces: tagging with question ids failed (%s); the traces stay untagged", error)
