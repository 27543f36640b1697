"""GET /metrics: what serve.py answered, refused, was rated and traced, in Prometheus' text format.

Each app counts in a registry of its own, not prometheus-client's global one, so two apps in one process count
apart. One scrape covers every tenant, so labels hold only what the server itself names (statuses, its routes,
the served variant, pipeline components, ratings), never a tenant, a question or anything drawn from documents.
The trace counts are read from `Traces.counts()` when scraped, and so are the answer cache's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from fastapi.routing import iter_route_contexts
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.requests import Request

from serving.online.traces import Traces

# Seconds; an answer may take up to serve.timeout_s (60 by default).
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
# The `stage` of a request's whole latency, beside its components'.
TOTAL = "total"
# The `path` of a refusal of no route of the app: a client picks the path, so it would grow the labels at will.
OTHER = "other"


class ServerMetrics:
    """The counters serve.py updates as it answers, and their exposition."""

    def __init__(
        self, traces: Callable[[], Traces | None], cache: Callable[[], Mapping[str, int]] | None = None
    ) -> None:
        """`cache`: the answer cache's counts (serve.cache), None when it is off."""
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
        self.registry.register(TraceCounts(traces))
        if cache is not None:
            self.registry.register(CacheCounts(cache))

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
        return generate_latest(self.registry)


class TraceCounts(Collector):
    """The traces' counters as Traces keeps them, read at each scrape: nothing while no model (or no tracing) is
    loaded."""

    def __init__(
        self, traces: Callable[[], Traces | None], cache: Callable[[], Mapping[str, int]] | None = None
    ) -> None:
        """`cache`: the answer cache's counts (serve.cache), None when it is off."""
        self.traces = traces

    def collect(self) -> Iterator[Metric]:
        traces = self.traces()
        if traces is None:
            return
        counts = traces.counts()
        yield CounterMetricFamily(
            "ragtune_traces_sent", "Traces and ratings written to the tracking store", value=counts["sent"]
        )
        yield CounterMetricFamily(
            "ragtune_traces_dropped", "Traces and ratings dropped: the queue was full or the store refused them",
            value=counts["dropped"],
        )
        yield GaugeMetricFamily("ragtune_traces_queued", "Traces and ratings waiting for the store", value=counts["queued"])


class CacheCounts(Collector):
    """The answer cache's counters and size, read at each scrape (serve.cache)."""

    def __init__(self, counts: Callable[[], Mapping[str, int]]) -> None:
        self.counts = counts

    def collect(self) -> Iterator[Metric]:
        counts = self.counts()
        for name, what in (("hits", "Replies served from the answer cache"),
                           ("misses", "Requests the answer cache did not hold: they go to the pipeline"),
                           ("evictions", "Replies dropped from the answer cache: least recently used, or expired")):
            yield CounterMetricFamily(f"ragtune_cache_{name}", what, value=counts[name])
        yield GaugeMetricFamily("ragtune_cache_entries", "Replies the answer cache holds", value=counts["entries"])
        yield GaugeMetricFamily("ragtune_cache_bytes", "Bytes of replies (as JSON) the answer cache holds",
                                value=counts["bytes"])
