"""Every answered request as an MLflow trace, written off the request path (serve.trace.*).

A request opens its root span at once, so its MLflow trace id ("tr-<hex>", made client-side from the
OpenTelemetry trace id) is known before the reply carries it; a sampled request's pipeline adds a span per
component under it (experiments.evaluation.mlflow_traces.MlflowTracer). Ending the root span is what writes the
trace, and that is left to one background thread fed by a bounded queue: when the tracking store is slow or down,
the queue fills, replies still go out on time, and the traces that do not fit are dropped and counted. Feedback
goes through the same queue, so it always reaches the store after the trace it rates.
"""

from __future__ import annotations

import hashlib
import logging
import os
import queue
import random
import re
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import mlflow
from haystack import tracing
from mlflow.entities import LiveSpan, SpanType
from mlflow.environment_variables import MLFLOW_ENABLE_ASYNC_TRACE_LOGGING
from mlflow.tracing.trace_manager import InMemoryTraceManager

from components.common.sentences import parse_citations, split_sentences, strip_citations
from experiments.evaluation.answer_metrics import citation_scores
from experiments.evaluation.mlflow_traces import MlflowTracer, end_spans
from pipelines.instrumentation import lean
from pipelines.run_layout import (
    TRACE_CACHED_TAG,
    TRACE_CONTENT_TAG,
    TRACE_DEGRADED_TAG,
    TRACE_LATENCY_TAG,
    TRACE_MODEL_VERSION_TAG,
    TRACE_REFUSED_TAG,
    TRACE_REQUEST_ID_TAG,
    TRACE_SAMPLED_TAG,
    TRACE_SHADOW_TAG,
    TRACE_STATUS_TAG,
    TRACE_TENANT_TAG,
    TRACE_VARIANT_TAG,
    quality_tag,
)
from serving.principals import Principal
from serving.settings import TraceSettings

logger = logging.getLogger("ragtune.serve")
ANONYMOUS = "anonymous"
# How many recent requests' owners are remembered for POST /feedback.
OWNERS_KEPT = 100_000
# Keys whose string values are identifiers, kept under `redacted`: they locate a chunk, they say nothing of it.
IDENTIFIERS = {"id", "chunk_id", "doc_id"}


def redact(value: Any) -> Any:
    """`value` with every text replaced by its sha256 and length (identifiers kept)."""
    if isinstance(value, str):
        return {"sha256": hashlib.sha256(value.encode()).hexdigest(), "chars": len(value)}
    if isinstance(value, dict):
        return {k: v if k in IDENTIFIERS and isinstance(v, str) else redact(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact(item) for item in value]
    return value


def shown_as(content: str) -> Callable[[Any], Any] | None:
    """What a trace keeps of a text under serve.trace.content; None: nothing."""
    return {"full": lambda value: value, "redacted": lambda value: redact(lean(value)), "none": None}[content]


def served_model(uri: str) -> tuple[str, str]:
    """(the model's name, its variant) from a served URI: models:/NAME@ALIAS serves ALIAS, anything else the
    champion."""
    found = re.fullmatch(r"models:/([^@/]+)(?:@(.+)|/.+)?", uri)
    if found is None:
        return uri.removeprefix("runs:/").split("/")[0], "champion"
    return found.group(1), found.group(2) or "champion"


def model_version(uri: str) -> str:
    """The registered version a models:/ URI serves ("run <id>" for a run served directly)."""
    found = re.fullmatch(r"models:/([^@/]+)(?:@(.+)|/(.+))", uri)
    if found is None:
        return f"run {served_model(uri)[0]}"
    name, alias, version = found.groups()
    return version or str(mlflow.MlflowClient().get_model_version_by_alias(name, alias).version)


def stated_version(uri: str) -> str:
    """The version a models:/NAME/VERSION URI states, without asking the registry; "" for any other URI."""
    found = re.fullmatch(r"models:/[^@/]+/([^@/]+)", uri)
    return found.group(1) if found else ""


def experiment_name(uri: str, override: str | None) -> str:
    return override or f"ragtune-serve/{served_model(uri)[0]}"


@dataclass
class Owners:
    """The principal of each recent request, by trace id: who may rate it. Kept in memory, not read back from the
    trace's tags, because the trace may not be written yet, or may have been dropped."""

    kept: int = OWNERS_KEPT

    def __post_init__(self) -> None:
        self._owners: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()

    def add(self, trace_id: str, principal: Principal | None) -> None:
        with self._lock:
            self._owners[trace_id] = identity(principal)
            while len(self._owners) > self.kept:
                self._owners.popitem(last=False)

    def owns(self, trace_id: str, principal: Principal | None) -> bool:
        with self._lock:
            return self._owners.get(trace_id) == identity(principal)


def identity(principal: Principal | None) -> str:
    if principal is None:
        return ANONYMOUS
    groups = f"{principal.tenant}|{','.join(sorted(principal.groups))}"
    return f"{groups}|{principal.subject}" if principal.subject else groups


class ServedAs(Protocol):
    """Which variant answers (serving.online.variants.Variant): its name and registered version."""

    name: str
    version: str


class RequestTrace:
    """One request's trace: its root span is open from `start` until the writer ends it."""

    def __init__(
        self, traces: Traces, question: str, principal: Principal | None, request_id: str, variant: str,
        version: str, rated: bool, cached: bool = False,
    ) -> None:
        self.traces = traces
        settings, shown = traces.settings, traces.shown
        self.start_ns = time.time_ns()
        self.root: LiveSpan = mlflow.start_span_no_context(
            name="request", span_type=SpanType.CHAIN, experiment_id=traces.experiment_id,
            inputs={"question": shown(question)} if shown else None,
            tags=traces.tags | {TRACE_REQUEST_ID_TAG: request_id, TRACE_VARIANT_TAG: variant,
                                TRACE_MODEL_VERSION_TAG: version, TRACE_SHADOW_TAG: str(not rated).lower(),
                                TRACE_TENANT_TAG: principal.tenant if principal else ANONYMOUS,
                                TRACE_CACHED_TAG: str(cached).lower()},
        )
        self.trace_id = self.root.trace_id
        # A cached reply runs no component: nothing to sample.
        sampled = not cached and random.random() < settings.sample  # noqa: S311 (a sample, not a secret)
        self.tracer = MlflowTracer(root=self.root, shown=shown or (lambda _: None)) if sampled else None
        if rated:  # a shadow's trace id is never sent to anyone, so nobody may rate it
            traces.owners.add(self.trace_id, principal)

    def finish(self, status: int, reply: dict[str, Any]) -> None:
        """Tags the trace with how the request ended and hands it to the writer."""
        shown = self.traces.shown
        refused = status != 200 or bool(reply.get("refused"))
        if shown is not None and reply:
            cited = [{k: c.get(k) for k in ("chunk_id", "doc_id", "snippet")} for c in reply.get("citations") or []]
            self.root.set_outputs({"answer": shown(reply.get("answer")), "refused": reply.get("refused"),
                                   "citations": shown(cited)})
        latency_ms = (time.time_ns() - self.start_ns) / 1e6
        with InMemoryTraceManager.get_instance().get_trace(self.trace_id) as trace:
            if trace is not None:
                trace.info.tags.update({TRACE_STATUS_TAG: str(status),
                                        TRACE_REFUSED_TAG: str(refused).lower(),
                                        TRACE_LATENCY_TAG: f"{latency_ms:.1f}",
                                        TRACE_SAMPLED_TAG: str(self.tracer is not None).lower()}
                                       | ({} if refused else quality_tags(reply))
                                       | degraded_tag(reply))
        if status != 200:
            self.root.set_status("ERROR")
        end_ns = time.time_ns()
        children = self.tracer.deferred.close() if self.tracer and self.tracer.deferred else []

        def write() -> None:  # in the writer thread: ending a span exports it
            end_spans(children)
            self.root.end(end_time_ns=end_ns)

        if not self.traces.submit(write):
            # dropped: freed from MLflow's buffer of open traces (keyed by the OpenTelemetry trace id)
            InMemoryTraceManager.get_instance().pop_trace(int(self.trace_id.removeprefix("tr-"), 16))


def degraded_tag(reply: dict[str, Any]) -> dict[str, str]:
    """The paths the reply was built without (the pipeline's own path names), when any."""
    return {TRACE_DEGRADED_TAG: ",".join(reply["degraded"])} if reply.get("degraded") else {}


def quality_tags(reply: dict[str, Any]) -> dict[str, str]:
    """The reference-free quality of an answered reply, as numeric tags for `ragtune online-report`: citation
    accuracy and unsupported-sentence rate as evaluation scores them (answer_metrics), from the sentences the reply's
    answer holds (a sentence is supported unless the reply lists it as unsupported), and the top retrieval score."""
    unsupported = set(reply.get("unsupported_sentences") or [])
    sentences = [{"citations": parse_citations(text), "supported": bool(parse_citations(text))
                  and strip_citations(text) not in unsupported} for text in split_sentences(reply.get("answer") or "")]
    scores = citation_scores({"citations": reply.get("citations") or [], "sentences": sentences})
    tags = {quality_tag(name.removeprefix("answer/")): f"{value:.4f}" for name, value in scores.items()}
    top = [d["score"] for d in reply.get("documents") or [] if d.get("score") is not None]
    return tags | ({quality_tag("top_score"): f"{max(top):.4f}"} if top else {})


def traced(record: RequestTrace | None) -> dict[str, MlflowTracer]:
    """The `tracer` argument of an answerer's `ask` for this request: given only when it is sampled, so answerers
    that trace nothing need not take it."""
    return {"tracer": record.tracer} if record is not None and record.tracer is not None else {}


class Unsent(logging.Handler):
    """MLflow's exporter does not raise when the store refuses a trace: it logs a warning and goes on. Counted here
    per thread, so the writer can tell a trace it sent from one it lost."""

    LOGGER = "mlflow.tracing.export.mlflow_v3"

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.counts: Counter[int] = Counter()

    def emit(self, record: logging.LogRecord) -> None:
        self.counts[record.thread or 0] += 1

    @classmethod
    def installed(cls) -> Unsent:
        exporter = logging.getLogger(cls.LOGGER)
        found = next((h for h in exporter.handlers if isinstance(h, cls)), None)
        if found is None:
            found = cls()
            exporter.addHandler(found)
        return found


def trace_experiment(uri: str, experiment: str | None) -> str:
    """The id of the experiment the traces of the model served from `uri` go to, made when missing (by serve.py
    before it starts its workers, so they do not race to make it)."""
    name = experiment_name(uri, experiment)
    client = mlflow.MlflowClient()
    found = client.get_experiment_by_name(name)
    return found.experiment_id if found is not None else client.create_experiment(name)


class Traces:
    """The served model's traces: where they go, what they keep, and the one thread that writes them."""

    def __init__(self, settings: TraceSettings, experiment_id: str) -> None:
        self.settings, self.experiment_id = settings, experiment_id
        self.shown = shown_as(settings.content)
        # `content`: what the spans keep of texts, so `ragtune harvest` knows whether it may read questions back.
        self.tags = {TRACE_CONTENT_TAG: settings.content}
        self.owners = Owners()
        self.sent = self.dropped = 0
        self._queue: queue.Queue[Callable[[], None]] = queue.Queue(maxsize=settings.queue_size)
        # Every span of a request is ended, and so exported, in the writer thread (DeferredEnds), so MLflow exports
        # synchronously there: its own async export would need a flush per trace (a rating must reach the store
        # after its trace), a flush waits up to a second for MLflow's worker, and while it flushes MLflow exports
        # in the caller's thread.
        os.environ[MLFLOW_ENABLE_ASYNC_TRACE_LOGGING.name] = "false"
        mlflow.tracing.reset()
        self._unsent = Unsent.installed()
        threading.Thread(target=self._write, name="ragtune-traces", daemon=True).start()

    @classmethod
    def for_model(cls, settings: TraceSettings, uri: str, experiment: str | None) -> Traces:
        """Traces of the model served from `uri` (every variant of it), into its experiment (made when missing).
        Haystack hands the components' inputs and outputs to the spans unless they keep none."""
        tracing.tracer.is_content_tracing_enabled = settings.content != "none"
        return cls(settings, trace_experiment(uri, experiment))

    def start(
        self, question: str, principal: Principal | None, request_id: str, variant: ServedAs, rated: bool = True,
        cached: bool = False,
    ) -> RequestTrace:
        """The trace of a request `variant` answers; `rated`: its trace id goes to the client, who may rate it
        (a shadow's does not); `cached`: answered from the answer cache."""
        return RequestTrace(self, question, principal, request_id, variant.name, variant.version, rated, cached)

    def submit(self, work: Callable[[], None]) -> bool:
        """Queues `work` for the writer; False (and counted) when the queue is full."""
        try:
            self._queue.put_nowait(work)
            return True
        except queue.Full:
            self.dropped += 1
            logger.warning('{"traces": "dropped", "dropped": %d, "reason": "the trace queue is full"}', self.dropped)
            return False

    def counts(self) -> dict[str, int]:
        return {"sent": self.sent, "dropped": self.dropped, "queued": self._queue.qsize()}

    def drain(self, seconds: float = 30.0) -> None:
        """Waits until everything queued is written (tests, and a server shutting down)."""
        deadline = time.monotonic() + seconds
        while self._queue.unfinished_tasks and time.monotonic() < deadline:
            time.sleep(0.02)

    def _write(self) -> None:
        me = threading.get_ident()
        while True:
            work = self._queue.get()
            refused = self._unsent.counts[me]
            try:
                work()  # written before the next (synchronous export): a rating follows its trace
                if self._unsent.counts[me] > refused:
                    raise RuntimeError("the tracking store refused it (MLflow's warning above)")
                self.sent += 1
            except Exception as error:  # noqa: BLE001 (the store's failure must not end the writer)
                self.dropped += 1
                logger.warning('{"traces": "dropped", "dropped": %d, "reason": %r}', self.dropped, str(error))
            finally:
                self._queue.task_done()
