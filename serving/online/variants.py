"""Several aliases of one registered model served side by side (serve.variants), and a shadow (serve.shadow).

A user keeps one variant: a salted hash of the principal picks it, so the same user sees the same pipeline on
every request (anonymous requests have no user to keep: each is drawn by its request id). A shadow answers a
request again after its reply has gone, in a few low-priority threads of its own; when they are all busy the
request is not shadowed, and that is counted. Its answer is traced under the same request id, never returned.
"""

from __future__ import annotations

import hashlib
import logging
import os
import queue
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from haystack.tracing import Tracer

from serving.online.traces import Traces, identity, traced
from serving.principals import Principal

logger = logging.getLogger("ragtune.serve")
# The nice value of shadow threads (Linux): the scheduler favours the champion's threads over them.
SHADOW_NICENESS = 19


class Answerer(Protocol):
    """What the server needs of a loaded pipeline (serving.served_pipeline.ServedPipeline)."""

    def ask(
        self,
        question: str,
        history: Sequence[Mapping[str, str]] | None = None,
        filters: Mapping[str, Any] | None = None,
        stages: bool = False,
        on_token: Callable[[str], None] | None = None,
        on_step: Callable[[dict[str, Any]], None] | None = None,
        tracer: Tracer | None = None,
    ) -> dict[str, Any]: ...


@dataclass
class Variant:
    """One served alias: its name (what replies, traces and metrics call it), URI, registered version and share of
    users; `answerer` is None until its pipeline is loaded, and `index` is the fingerprint of the index it serves
    (set with it, by serve.py), which the answer cache keys on."""

    name: str
    uri: str
    version: str = ""
    weight: float = 1.0
    answerer: Answerer | None = None
    index: str = ""


def assign(variants: Sequence[Variant], principal: Principal | None, request_id: str, salt: str) -> Variant:
    """The variant a request goes to: by a salted hash of its principal (sticky), or of its request id when it
    has none, mapped onto the variants' cumulative weights (in the order given)."""
    if len(variants) == 1:
        return variants[0]
    key = f"{salt}|{identity(principal) if principal is not None else request_id}"
    point = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") / 2**64
    total, reached = sum(v.weight for v in variants), 0.0
    for variant in variants:
        reached += variant.weight / total
        if point < reached:
            return variant
    return [v for v in variants if v.weight > 0][-1]


@dataclass
class ShadowJob:
    question: str
    history: list[dict[str, str]]
    filters: dict[str, Any]  # the principal's scoping already applied, as for the reply's own answer
    principal: Principal | None
    request_id: str


class Shadow:
    """Answers served requests again with `variant`, in `concurrency` low-priority threads fed by a queue that
    holds as many jobs; a request that finds it full is shed (`shed`), never waited for."""

    def __init__(
        self, variant: Variant, concurrency: int, traces: Traces | None, on_answered: Callable[[int], None]
    ) -> None:
        self.variant, self.traces, self.on_answered = variant, traces, on_answered
        self.shed = 0
        self._jobs: queue.Queue[ShadowJob] = queue.Queue(maxsize=concurrency)
        for n in range(concurrency):
            threading.Thread(target=self._work, name=f"ragtune-shadow-{n}", daemon=True).start()

    def offer(self, job: ShadowJob) -> bool:
        """Queues `job`; False (and counted) when the shadow is not loaded yet or its queue is full."""
        if self.variant.answerer is not None:
            try:
                self._jobs.put_nowait(job)
                return True
            except queue.Full:
                pass
        self.shed += 1
        return False

    def drain(self) -> None:
        """Waits until every queued job is answered (tests, and a server shutting down)."""
        self._jobs.join()

    def _work(self) -> None:
        lower_priority()
        while True:
            job = self._jobs.get()
            try:
                self._answer(job)
            finally:
                self._jobs.task_done()

    def _answer(self, job: ShadowJob) -> None:
        answerer = self.variant.answerer
        assert answerer is not None  # offer() queues nothing before it is loaded
        record = (self.traces.start(job.question, job.principal, job.request_id, self.variant, rated=False)
                  if self.traces else None)
        status, reply = 200, {}
        try:
            reply = answerer.ask(job.question, job.history, job.filters, **traced(record))
        except Exception:  # noqa: BLE001 (a shadow's failure is its own: logged and traced, the reply went already)
            status = 500
            logger.exception("shadow %s failed on request %s", self.variant.name, job.request_id)
        finally:
            if record is not None:
                record.finish(status, reply)
            self.on_answered(status)


def lower_priority() -> None:
    """On Linux, nice is per thread, and threads this one starts (e.g. torch's) inherit it."""
    if sys.platform == "linux":
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), SHADOW_NICENESS)
