"""How serve.py answers a request that passed its checks: on the variant its principal is assigned, from the
answer cache when it holds the reply (serve.cache), else in a thread the pending limit admits, within the timeout
and while the client waits; with one log line however it ends."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from fastapi import HTTPException, Request
from haystack.errors import FilterError

from pipelines.errors import UserError
from serving.http.answer_cache import cache_key
from serving.http.refusals import ANONYMOUS, log_request
from serving.http.state import ServerContext
from serving.online.traces import RequestTrace, traced
from serving.online.variants import Answerer, ShadowJob, Variant, assign
from serving.principals import Principal, scoped_filters
from serving.request_schema import RequestRefused, Turn, check_request

logger = logging.getLogger("ragtune.serve")
# A request whose client closed the connection before its reply, logged as nginx logs it.
CLIENT_CLOSED = 499
T = TypeVar("T")


async def answer(
    request: Request,
    context: ServerContext,
    principal: Principal | None,
    question: str,
    history: list[Turn],
    filters: dict[str, Any] | None,
    on_token: Callable[[str], None] | None = None,
    on_step: Callable[[dict[str, Any]], None] | None = None,
) -> dict:
    """Answers one request of `principal`'s on the variant it is assigned: from the answer cache when it holds
    the reply for these scoped filters (`request.state.cache` says hit or miss), else its pipeline runs in a
    thread, within serve.timeout_s and while the client waits, and a whole answer is stored; its one log line,
    metrics and trace are written however it ends."""
    state, limits, metrics, shadow, pending, cache = (
        context.state, context.limits, context.metrics, context.shadow, context.pending, context.cache)
    try:
        check_request(question, [turn.content for turn in history], filters, limits)
    except RequestRefused as e:
        raise HTTPException(e.status, e.reason) from None
    request_id = request.state.request_id
    variant = assign(state.variants, principal, request_id, state.salt)
    if variant.answerer is None:
        raise HTTPException(503, "not ready: the model is loading")
    scoped = scoped_filters(principal, filters)
    turns = [t.model_dump() for t in history]
    key = None
    if cache is not None:
        key = cache_key(variant, question, turns, scoped, limits.debug)
        stored = cache.get(key)
        request.state.cache = "miss" if stored is None else "hit"
        if stored is not None:
            return cached(request, context, principal, question, variant, stored)
    if not pending.acquire(blocking=False):
        raise HTTPException(503, f"busy: {limits.max_pending} requests already pending")
    start = time.perf_counter()
    record = state.traces.start(question, principal, request_id, variant) if state.traces else None
    trace_id = record.trace_id if record else request_id
    status, reply, reason = 200, {}, None
    try:
        work = asyncio.to_thread(
            _run_then_release, variant.answerer, pending, question, turns, scoped, limits.debug, on_token, on_step,
            record,
        )
        reply = await unless_hung_up(request, asyncio.wait_for(asyncio.shield(work), timeout=limits.timeout_s))
    except TimeoutError:
        status, reason = 504, f"timed out after {limits.timeout_s} s"
    except ClientClosed:
        status, reason = CLIENT_CLOSED, "the client closed the connection before the reply"
    except Exception as e:
        fault = request_fault(e)
        # e.g. filters the store cannot apply: the request's fault, said in one line
        status, reason = (400, fault) if fault is not None else (500, f"internal error (trace_id {trace_id})")
        if fault is None:
            logger.exception("trace %s failed", trace_id)
    finally:
        seconds = time.perf_counter() - start
        _log(request, trace_id, principal, status, seconds, reply.get("stages_ms"),
             question if limits.debug else None, reason, None if key is None else "miss", reply.get("degraded"))
        request.state.logged = True  # its one line is written: `refused` writes no second one
        metrics.answered(status, variant.name, seconds, reply.get("stages_ms"))
        if record is not None:
            record.finish(status, reply)
    if reason is not None:
        raise HTTPException(status, reason)
    metrics.degraded(reply.get("degraded") or [])
    # A whole answer only: errors, timeouts and hang-ups raised above, and a degraded one would outlive the outage.
    if cache is not None and key is not None and not reply.get("degraded"):
        cache.put(key, reply)
    if shadow is not None and not shadow.offer(ShadowJob(question, turns, scoped, principal, request_id)):
        metrics.shadow_shed()
    return reply | served_as(trace_id, variant, cached=False)


def cached(
    request: Request, context: ServerContext, principal: Principal | None, question: str, variant: Variant,
    stored: dict[str, Any],
) -> dict[str, Any]:
    """A reply from the answer cache, in the event loop (no pipeline runs, so it takes no pending slot and has no
    shadow). Its trace is this request's own, tagged a cache hit, with no component spans: its trace id goes to
    this principal alone, who alone may rate it."""
    traces, request_id, start = context.state.traces, request.state.request_id, time.perf_counter()
    record = traces.start(question, principal, request_id, variant, cached=True) if traces else None
    trace_id = record.trace_id if record else request_id
    reply = stored | {"stages_ms": {}}  # no component ran
    seconds = time.perf_counter() - start
    _log(request, trace_id, principal, 200, seconds, None, question if context.limits.debug else None, None,
         cache="hit")
    request.state.logged = True
    context.metrics.answered(200, variant.name, seconds, None)
    if record is not None:
        record.finish(200, reply)
    return reply | served_as(trace_id, variant, cached=True)


def served_as(trace_id: str, variant: Variant, cached: bool) -> dict[str, Any]:
    """What a reply says of how this request was served, added to the pipeline's reply (and never stored)."""
    return {"trace_id": trace_id, "variant": variant.name, "model_version": variant.version, "cached": cached}


class ClientClosed(Exception):
    """The client closed its connection before its reply was ready."""


async def unless_hung_up(request: Request, work: Awaitable[T]) -> T:
    """`work`'s result, or ClientClosed as soon as the client closes its connection, so that a reply nobody
    receives is logged as 499, not 200. The pipeline's thread runs on, holding its slot until it ends."""
    answer, hang_up = asyncio.ensure_future(work), asyncio.ensure_future(_hung_up(request))
    try:
        await asyncio.wait({answer, hang_up}, return_when=asyncio.FIRST_COMPLETED)
        if answer.done():
            return answer.result()
        raise ClientClosed
    finally:
        answer.cancel()
        hang_up.cancel()


async def _hung_up(request: Request) -> None:
    """Returns when the server receives `http.disconnect`: the body is read already, so nothing else comes."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


def request_fault(error: BaseException | None) -> str | None:
    """The message of the UserError or FilterError behind `error`, which Haystack wraps in PipelineRuntimeError
    when a component raises it; None for any other failure (the server's)."""
    while error is not None:
        if isinstance(error, UserError | FilterError):
            return str(error)
        error = error.__cause__
    return None


def _run_then_release(
    answerer: Answerer,
    pending: threading.BoundedSemaphore,
    question: str,
    history: list,
    filters: dict,
    stages: bool,
    on_token: Callable[[str], None] | None,
    on_step: Callable[[dict[str, Any]], None] | None,
    record: RequestTrace | None,
) -> dict[str, Any]:
    """The slot is freed when the work ends, not when the client stops waiting: a timed-out question still holds
    the pipeline until it finishes, so it still counts. A sampled request's components are traced under its root."""
    try:
        return answerer.ask(question, history, filters, stages=stages, on_token=on_token, on_step=on_step,
                            **traced(record))
    finally:
        pending.release()


def _log(
    request: Request, trace_id: str, principal: Principal | None, status: int, seconds: float,
    stages_ms: dict | None, question: str | None, reason: str | None, cache: str | None = None,
    degraded: list[str] | None = None,
) -> None:
    """The line of a request that reached the pipeline or the cache; `reason` is the error its reply carries, if
    any, and `degraded` the retrieval paths it was answered without, if any."""
    record: dict[str, Any] = {
        "trace_id": trace_id, "tenant": principal.tenant if principal else ANONYMOUS, "status": status,
        "latency_ms": round(seconds * 1000, 1),
    }
    if cache is not None:
        record["cache"] = cache
    if reason is not None:
        record["refused"] = reason
    if degraded:
        record["degraded"] = degraded
    if stages_ms:
        record["stages_ms"] = stages_ms
    if question is not None:
        record["question"] = question
    log_request(request, record)
