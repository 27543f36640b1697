"""Per-component latency through Haystack's own tracing hook, so any component in any pipeline is timed."""

from __future__ import annotations

import contextlib
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from haystack import tracing
from haystack.tracing import Span, Tracer

COMPONENT_RUN = "haystack.component.run"
COMPONENT_NAME = "haystack.component.name"


class _TimedSpan(Span):
    def __init__(self, tags: dict[str, Any]) -> None:
        self.tags = dict(tags)

    def set_tag(self, key: str, value: Any) -> None:
        self.tags[key] = value

    def raw_span(self) -> Any:
        return self


@dataclass(frozen=True)
class ComponentRuns:
    """Per component since the last `take()`: summed wall-clock milliseconds and the number of runs."""

    ms: dict[str, float]
    calls: dict[str, int]


class ComponentTimer(Tracer):
    """Collects wall-clock milliseconds and run counts per component; `take()` returns and clears them."""

    def __init__(self) -> None:
        self._current: list[_TimedSpan] = []
        self._times: dict[str, float] = defaultdict(float)
        self._calls: Counter[str] = Counter()

    @contextlib.contextmanager
    def trace(
        self, operation_name: str, tags: dict[str, Any] | None = None, parent_span: Span | None = None
    ) -> Iterator[Span]:
        span = _TimedSpan(tags or {})
        self._current.append(span)
        start = time.perf_counter()
        try:
            yield span
        finally:
            self._current.pop()
            if operation_name == COMPONENT_RUN:
                name = str(span.tags.get(COMPONENT_NAME))
                self._times[name] += (time.perf_counter() - start) * 1000
                self._calls[name] += 1

    def current_span(self) -> Span | None:
        return self._current[-1] if self._current else None

    def take(self) -> ComponentRuns:
        """Runs since the last call (a component run twice in a loop is summed and counted twice)."""
        runs = ComponentRuns(dict(self._times), dict(self._calls))
        self._times, self._calls = defaultdict(float), Counter()
        return runs


@contextlib.contextmanager
def timing_components() -> Iterator[ComponentTimer]:
    """Enables the timer for the block and restores whatever tracer was active before."""
    previous = tracing.tracer.actual_tracer
    timer = ComponentTimer()
    tracing.enable_tracing(timer)
    try:
        yield timer
    finally:
        tracing.enable_tracing(previous)
