"""GET /metrics: what serve.py answered, refused, was rated and traced, in Prometheus' text format.

Each app counts in a registry of its own, not prometheus-client's global one, so two apps in one process count
apart. One scrape covers every tenant, so labels hold only what the server itself names (statuses, its routes,
the served variant, pipeline components, ratings), never a tenant, a question or anything drawn from documents.
The trace counts are read from `Traces.counts()` when scraped, and so are the answer cache's. With serve.workers
above 1 a scrape reaches one worker: every worker counts in prometheus-client's multiprocess files instead, and a
scrape sums them all.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi.routing import iter_route_contexts
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest, values
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead
from prometheus_client.registry import Collector
from starlette.requests import Request

from pipelines.processes import alive
from serving.online.traces import Traces

# Seconds; an answer may take up to serve.timeout_s (60 by default).
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
# The `stage` of a request's whole latency, beside its components'.
TOTAL = "total"
# The `path` of a refusal of no route of the app: a client picks the path, so it would grow the labels at will.
OTHER = "other"
# prometheus-client's multiprocess folder: read when it is imported, so set before a worker starts.
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
# Seconds between a worker's publications of its trace and cache counts (a scraped worker publishes first).
PUBLISH_SECONDS = 1.0
# A source of counts (Traces.counts, AnswerCache.counts): None while there is none.
CountSource = Callable[[], Mapping[str, int] | None]


class ServerMetrics:
    """The counters serve.py updates as it answers, and their exposition."""

    def __init__(
        self, traces: Callable[[], Traces | None], cache: Callable[[], Mapping[str, int]] | None = None,
        multiprocess: bool = False,
    ) -> None:
        """`cache`: the answer cache's counts (serve.cache), None when it is off. `multiprocess`: one of
        serve.workers' processes, started with $PROMETHEUS_MULTIPROC_DIR set, so that its counters live in that
        folder's files; the trace and cache counts are published there too (PublishedCounts), and a scrape sums
        every worker's."""
        if multiprocess and not getattr(values.ValueClass, "_multiprocess", False):
            raise RuntimeError(f"${MULTIPROC_ENV} must be set before prometheus_client is imported")
        self.multiprocess = multiprocess
        self.registry = CollectorRegistry()
        self._paths: frozenset[str] | None = None
        self._requests = Counter(
            "ragtune_requests", "Requests that reached the pipeline, by reply status and served variant",
            ["status", "variant"], registry=self.registry,
        )
        self._latency = Histogram(
            "ragtune_request_latency_seconds", "Latency of the pipeline's components, and of the whole request",
            ["stage"], buckets=LATENCY_BUCKETS, registry=self.registry,
        )
        self._refusals = Counter(
            "ragtune_refusals", "Requests answered with an error, by status and route", ["status", "path"],
            registry=self.registry,
        )
        self._feedback = Counter(
            "ragtune_feedback", "Ratings accepted by POST /feedback, by rating and scale", ["rating", "scale"],
            registry=self.registry,
        )
        self._shadow = Counter(
            "ragtune_shadow_requests", "Requests the shadow variant answered again, by its status", ["status"],
            registry=self.registry,
        )
        self._shed = Counter(
            "ragtune_shadow_shed", "Requests not shadowed: every shadow thread was busy (or not loaded yet)",
            registry=self.registry,
        )
        self._degraded = Counter(
            "ragtune_degraded", "Requests answered without a retrieval path that failed or timed out, by path",
            ["path"], registry=self.registry,
        )
        sources: list[tuple[CountSource, Sequence[Count]]] = [
            (lambda: None if (t := traces()) is None else t.counts(), TRACE_COUNTS),
            *([(cache, CACHE_COUNTS)] if cache is not None else []),
        ]
        self._published = [PublishedCounts(counts, figures) for counts, figures in sources] if multiprocess else []
        if not multiprocess:
            for counts, figures in sources:
                self.registry.register(ReadCounts(counts, figures))

    def answered(self, status: int, variant: str, seconds: float, stages_ms: Mapping[str, float] | None) -> None:
        """A request that reached the pipeline: its status, its whole latency, and each component's."""
        self._requests.labels(status=str(status), variant=variant).inc()
        self._latency.labels(stage=TOTAL).observe(seconds)
        for stage, ms in (stages_ms or {}).items():
            self._latency.labels(stage=stage).observe(ms / 1000)

    def degraded(self, paths: list[str]) -> None:
        """A reply built without these paths (the pipeline's own path names, never a request's)."""
        for path in paths:
            self._degraded.labels(path=path).inc()

    def refused(self, status: int, request: Request) -> None:
        """A refused request, by its route: the app's own paths are the only ones kept as a label."""
        if self._paths is None:  # the app's routes are fixed once it serves: read them at the first refusal
            # FastAPI keeps an included router as one entry of `app.routes`: its walker yields each route of it.
            self._paths = frozenset(route.path for route in iter_route_contexts(request.app.routes))
        path = request.url.path
        self._refusals.labels(status=str(status), path=path if path in self._paths else OTHER).inc()

    def shadow_answered(self, status: int) -> None:
        self._shadow.labels(status=str(status)).inc()

    def shadow_shed(self) -> None:
        self._shed.inc()

    def rated(self, rating: int, scale: int) -> None:
        self._feedback.labels(rating=str(rating), scale=str(scale)).inc()

    def exposition(self) -> bytes:
        if not self.multiprocess:
            return generate_latest(self.registry)
        self.publish()
        folder = Path(os.environ[MULTIPROC_ENV])
        for level in folder.glob("gauge_live*_*.db"):  # a worker that is gone no longer holds a level
            pid = int(level.stem.rsplit("_", 1)[1])
            if not alive(pid):
                mark_process_dead(pid, str(folder))
        summed = CollectorRegistry()
        MultiProcessCollector(summed, str(folder))
        return generate_latest(summed)

    def publish(self) -> None:
        """With `multiprocess`, writes this worker's trace and cache counts into its files, where the other
        workers' scrapes read them: a worker does so every PUBLISH_SECONDS, and before its own scrapes."""
        for published in self._published:
            published.publish()


@dataclass(frozen=True)
class Count:
    """One figure of a count source (the trace writer's, the answer cache's): its metric, its key in the source's
    counts, and whether it only grows (a counter) or is a level (a gauge)."""

    name: str
    key: str
    help: str
    grows: bool = True


TRACE_COUNTS = (
    Count("ragtune_traces_sent", "sent", "Traces and ratings written to the tracking store"),
    Count("ragtune_traces_dropped", "dropped", "Traces and ratings dropped: the queue was full or the store refused them"),
    Count("ragtune_traces_queued", "queued", "Traces and ratings waiting for the store", grows=False),
)
CACHE_COUNTS = (
    Count("ragtune_cache_hits", "hits", "Replies served from the answer cache"),
    Count("ragtune_cache_misses", "misses", "Requests the answer cache did not hold: they go to the pipeline"),
    Count("ragtune_cache_evictions", "evictions", "Replies dropped from the answer cache: least recently used, or expired"),
    Count("ragtune_cache_entries", "entries", "Replies the answer cache holds", grows=False),
    Count("ragtune_cache_bytes", "bytes", "Bytes of replies (as JSON) the answer cache holds", grows=False),
)


class ReadCounts(Collector):
    """A count source read at each scrape (one process): nothing while it is None (no model, or no tracing,
    loaded yet)."""

    def __init__(self, counts: CountSource, figures: Sequence[Count]) -> None:
        self.counts, self.figures = counts, figures

    def collect(self) -> Iterator[Metric]:
        counts = self.counts()
        if counts is None:
            return
        for figure in self.figures:
            family = CounterMetricFamily if figure.grows else GaugeMetricFamily
            yield family(figure.name, figure.help, value=counts[figure.key])


class PublishedCounts:
    """A count source of one of serve.workers' processes, published into prometheus-client's multiprocess files
    (where scrape-time collectors cannot reach), so that a scrape of any worker sums it over all of them: a counter
    grows by what the source counted since the last publication, a gauge holds this worker's level (summed over
    the workers alive)."""

    def __init__(self, counts: CountSource, figures: Sequence[Count]) -> None:
        self.counts, self.figures = counts, figures
        self._metrics: dict[str, Counter | Gauge] = {}
        self._published: dict[str, int] = {}
        self._lock = threading.Lock()

    def publish(self) -> None:
        counts = self.counts()
        if counts is None:
            return
        with self._lock:
            for figure in self.figures:
                value = counts[figure.key]
                if figure.grows:
                    counter = self._metric(figure, Counter)
                    counter.inc(value - self._published.get(figure.name, 0))
                    self._published[figure.name] = value
                else:
                    self._metric(figure, Gauge).set(value)

    def _metric(self, figure: Count, kind: type[Counter] | type[Gauge]) -> Any:
        """Made at the first publication, as ReadCounts shows nothing before the source exists."""
        if figure.name not in self._metrics:
            extra = {} if kind is Counter else {"multiprocess_mode": "livesum"}
            self._metrics[figure.name] = kind(figure.name, figure.help, registry=None, **extra)
        return self._metrics[figure.name]
