"""The HTTP API over a promoted pipeline (`serve.py`): /query, an OpenAI-compatible /v1/chat/completions, and
/healthz and /readyz.

Plain FastAPI rather than Hayhooks: Hayhooks serves a pipeline YAML, but what we serve is a bundle whose store
is filled from a snapshot, whose models are checked against the evaluated ones, and whose every request must be
scoped to its principal before any retriever runs; with Hayhooks all of that would live in a pipeline wrapper
anyway, beside a second server's conventions.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from haystack.errors import FilterError
from pydantic import BaseModel, ConfigDict

from experiments.config import ConfigError
from experiments.errors import UserError
from experiments.principals import (
    JwtSettings,
    JwtVerifier,
    Principal,
    from_headers,
    read_api_keys,
    scoped_filters,
)
from experiments.request_schema import QueryRequest, Turn

logger = logging.getLogger("ragtune.serve")
LOOPBACK = {"127.0.0.1", "::1", "localhost"}


class Answerer(Protocol):
    """What the server needs of a loaded pipeline (experiments.promoted.ServedPipeline)."""

    def ask(
        self,
        question: str,
        history: Sequence[Mapping[str, str]] | None = None,
        filters: Mapping[str, Any] | None = None,
        stages: bool = False,
        on_token: Callable[[str], None] | None = None,
    ) -> dict[str, Any]: ...


@dataclass
class ServeSettings:
    """The `serve` section of conf/serve.yaml, as its structured schema (a wrong type fails before anything loads)."""

    host: str = "127.0.0.1"
    port: int = 8080
    auth: str = "api_keys"
    api_keys_file: str | None = None
    jwt: JwtSettings = field(default_factory=JwtSettings)
    trust_proxy: bool = False
    max_pending: int = 8
    timeout_s: float = 60.0
    max_question_chars: int = 2000
    max_history_turns: int = 20
    max_history_chars: int = 20000
    debug: bool = False
    autolog: bool = False
    trace_experiment: str = "ragtune-serve"


class ChatRequest(BaseModel):
    model_config = ConfigDict(extra="allow")  # OpenAI clients send model, temperature, ...: accepted, not used
    messages: list[Turn]
    stream: bool = False


@dataclass
class ServerState:
    answerer: Answerer | None = None
    model_uri: str = ""


def create_app(
    state: ServerState,
    authenticate: Callable[[Request], Principal | None],
    limits: ServeSettings,
) -> FastAPI:
    app = FastAPI(title="ragtune", docs_url=None, redoc_url=None)
    pending = threading.BoundedSemaphore(limits.max_pending)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, error: RequestValidationError) -> JSONResponse:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'][1:]) or 'body'}: {e['msg']}" for e in error.errors())
        return JSONResponse({"error": f"invalid request: {problems}"}, status_code=400)

    @app.get("/healthz")
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz")
    def readyz() -> JSONResponse:
        ready = state.answerer is not None
        return JSONResponse({"ready": ready, "model": state.model_uri}, status_code=200 if ready else 503)

    async def answer(
        request: Request,
        question: str,
        history: list[Turn],
        filters: dict[str, Any] | None,
        on_token: Callable[[str], None] | None = None,
    ) -> dict:
        principal = authenticate(request)
        if principal is None:
            raise HTTPException(401, "unauthenticated: send Authorization: Bearer <key>")
        _check_limits(question, history, limits)
        if state.answerer is None:
            raise HTTPException(503, "not ready: the model is loading")
        if not pending.acquire(blocking=False):
            raise HTTPException(503, f"busy: {limits.max_pending} requests already pending")
        trace_id, start = uuid.uuid4().hex, time.perf_counter()
        scoped = scoped_filters(principal, filters)
        turns = [t.model_dump() for t in history]
        status, reply = 200, {}
        try:
            work = asyncio.to_thread(
                _run_then_release, state.answerer, pending, question, turns, scoped, limits.debug, on_token
            )
            reply = await asyncio.wait_for(asyncio.shield(work), timeout=limits.timeout_s)
        except TimeoutError:
            status = 504
            raise HTTPException(504, f"timed out after {limits.timeout_s} s") from None
        except Exception as e:
            fault = request_fault(e)
            if fault is not None:  # e.g. filters the store cannot apply: the request's fault, said in one line
                status = 400
                raise HTTPException(400, fault) from None
            status = 500
            logger.exception("trace %s failed", trace_id)
            raise HTTPException(500, f"internal error (trace_id {trace_id})") from None
        finally:
            seconds = time.perf_counter() - start
            _log(trace_id, principal, status, seconds, reply.get("stages_ms"), question if limits.debug else None)
        return reply | {"trace_id": trace_id}

    @app.post("/query", response_model=None)
    async def query(request: Request, body: QueryRequest) -> dict | StreamingResponse:
        if body.stream:
            return await streamed(
                lambda on_token: answer(request, body.question, body.history, body.filters, on_token), QueryEvents()
            )
        return await answer(request, body.question, body.history, body.filters)

    @app.post("/v1/chat/completions", response_model=None)
    async def chat(request: Request, body: ChatRequest) -> dict | StreamingResponse:
        if not body.messages or body.messages[-1].role != "user":
            raise HTTPException(400, "messages: the last message must be the user's question")
        question, history = body.messages[-1].content, body.messages[:-1]
        if body.stream:
            return await streamed(lambda on_token: answer(request, question, history, None, on_token),
                                  ChatChunks(state.model_uri))
        reply = await answer(request, question, history, None)
        return {
            "id": f"chatcmpl-{reply['trace_id']}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": state.model_uri,
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": reply.get("answer") or ""}}],
            "ragtune": reply,
        }

    return app


class QueryEvents:
    """/query's server-sent events: `token` per generated piece, then `answer` (the reply stream=false gives, with
    the citation check applied) or `error`."""

    def token(self, text: str) -> str:
        return _sse({"text": text}, "token")

    def final(self, reply: dict[str, Any]) -> str:
        return _sse(reply, "answer")

    def error(self, status: int, detail: str) -> str:
        return _sse({"status": status, "error": detail}, "error")


class ChatChunks:
    """OpenAI's `chat.completion.chunk` stream. The last chunk carries the whole verified reply as `ragtune`; when
    the generator streams nothing (span and extractive answers), the answer comes as one chunk before it."""

    def __init__(self, model: str) -> None:
        self.id, self.model, self.streamed = f"chatcmpl-{uuid.uuid4().hex}", model, False

    def _chunk(self, delta: dict[str, str], finish: str | None = None, **extra: Any) -> str:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        body = {"id": self.id, "object": "chat.completion.chunk", "created": int(time.time()), "model": self.model}
        return _sse(body | {"choices": [choice]} | extra)

    def token(self, text: str) -> str:
        first = {} if self.streamed else {"role": "assistant"}
        self.streamed = True
        return self._chunk(first | {"content": text})

    def final(self, reply: dict[str, Any]) -> str:
        whole = "" if self.streamed else self.token(reply.get("answer") or "")
        return whole + self._chunk({}, "stop", ragtune=reply) + "data: [DONE]\n\n"

    def error(self, status: int, detail: str) -> str:
        return _sse({"error": {"message": detail, "code": status}}) + "data: [DONE]\n\n"


def _sse(data: Any, event: str | None = None) -> str:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data, ensure_ascii=False)}\n\n"


async def streamed(
    run: Callable[[Callable[[str], None]], Awaitable[dict[str, Any]]], frames: QueryEvents | ChatChunks
) -> StreamingResponse:
    """Starts `run` with a token callback and streams what it produces. A request refused before its first token
    (401, 400, 413, 503) is refused as a plain HTTP error; once the stream has begun, a failure is its last event."""
    loop = asyncio.get_running_loop()
    tokens: asyncio.Queue[str] = asyncio.Queue()
    task = asyncio.ensure_future(run(lambda text: loop.call_soon_threadsafe(tokens.put_nowait, text)))
    getter = asyncio.ensure_future(tokens.get())
    await asyncio.wait({task, getter}, return_when=asyncio.FIRST_COMPLETED)
    if task.done() and not getter.done() and task.exception() is not None:
        getter.cancel()
        raise task.exception()  # type: ignore[misc]

    async def events() -> AsyncIterator[str]:
        nonlocal getter
        while True:
            done, _ = await asyncio.wait({task, getter}, return_when=asyncio.FIRST_COMPLETED)
            if getter in done:
                yield frames.token(getter.result())
                getter = asyncio.ensure_future(tokens.get())
                continue
            getter.cancel()
            while not tokens.empty():
                yield frames.token(tokens.get_nowait())
            try:
                reply = task.result()
            except HTTPException as e:
                yield frames.error(e.status_code, str(e.detail))
                return
            yield frames.final(reply)
            return

    return StreamingResponse(events(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})


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
) -> dict[str, Any]:
    """The slot is freed when the work ends, not when the client stops waiting: a timed-out question still holds
    the pipeline until it finishes, so it still counts."""
    try:
        return answerer.ask(question, history, filters, stages=stages, on_token=on_token)
    finally:
        pending.release()


def _check_limits(question: str, history: list[Turn], limits: ServeSettings) -> None:
    if not question.strip():
        raise HTTPException(400, "question: must not be empty")
    if len(question) > limits.max_question_chars:
        raise HTTPException(413, f"question: {len(question)} characters, the limit is {limits.max_question_chars}")
    if len(history) > limits.max_history_turns:
        raise HTTPException(413, f"history: {len(history)} turns, the limit is {limits.max_history_turns}")
    if (chars := sum(len(t.content) for t in history)) > limits.max_history_chars:
        raise HTTPException(413, f"history: {chars} characters, the limit is {limits.max_history_chars}")


def _log(
    trace_id: str, principal: Principal, status: int, seconds: float, stages_ms: dict | None, question: str | None
) -> None:
    record: dict[str, Any] = {
        "trace_id": trace_id, "tenant": principal.tenant, "status": status, "latency_ms": round(seconds * 1000, 1),
    }
    if stages_ms:
        record["stages_ms"] = stages_ms
    if question is not None:
        record["question"] = question
    logger.info(json.dumps(record, ensure_ascii=False))


def bearer(lookup: Callable[[str], Principal | None]) -> Callable[[Request], Principal | None]:
    """`Authorization: Bearer TOKEN`, TOKEN an API key (`keys.get`) or a JWT (`JwtVerifier.principal`)."""

    def authenticate(request: Request) -> Principal | None:
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        return lookup(token.strip()) if scheme.lower() == "bearer" and token.strip() else None

    return authenticate


def authenticator(serve: ServeSettings) -> Callable[[Request], Principal | None]:
    """What `serve.auth` names; a mistake in its settings fails here, before anything loads."""
    if serve.auth == "api_keys":
        return bearer(read_api_keys(Path(serve.api_keys_file) if serve.api_keys_file else None).get)
    if serve.auth == "jwt":
        return bearer(JwtVerifier(serve.jwt).principal)
    if serve.auth == "header":
        return proxy_headers(serve.host, serve.trust_proxy)
    raise ConfigError(f"config key 'serve.auth': must be api_keys, jwt or header, got {serve.auth!r}")


def proxy_headers(host: str, trust_proxy: bool) -> Callable[[Request], Principal | None]:
    if host not in LOOPBACK and not trust_proxy:
        raise ConfigError(
            f"config key 'serve.auth': header auth trusts X-Tenant from any client; bind serve.host to loopback "
            f"(not {host}) behind your proxy, or set serve.trust_proxy=true"
        )
    return lambda request: from_headers(request.headers)
