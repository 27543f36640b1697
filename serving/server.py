"""The HTTP API over a promoted pipeline (`serve.py`): /query, an OpenAI-compatible /v1/chat/completions, and
/healthz and /readyz; /metrics for Prometheus (loopback or an admin key).

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
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import InitVar, dataclass, field
from typing import Any, TypeVar

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from haystack.errors import FilterError
from prometheus_client import CONTENT_TYPE_LATEST
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pipelines.errors import ConfigError, UserError
from serving.online.feedback import UNKNOWN, FeedbackReply, FeedbackRequest, Ratings
from serving.online.metrics import ServerMetrics
from serving.online.traces import RequestTrace, Traces, served_model, stated_version, traced
from serving.online.variants import Answerer, Shadow, ShadowJob, Variant, assign
from serving.principals import Principal, Unauthenticated, credential_lookup, from_headers, scoped_filters
from serving.replies import AgentStep, ChatChoice, ChatCompletion, ChatMessageOut, QueryReply
from serving.request_schema import ChatRequest, QueryRequest, RequestRefused, Turn, check_request
from serving.settings import ServeSettings

logger = logging.getLogger("ragtune.serve")
LOOPBACK = {"127.0.0.1", "::1", "localhost"}
# Headers that say who asks: sent twice (a proxy that appends instead of replacing), the request is refused.
IDENTITY_HEADERS = ("authorization", "x-tenant", "x-groups", "x-user")
ANONYMOUS = "anonymous"
# A request whose client closed the connection before its reply, logged as nginx logs it.
CLIENT_CLOSED = 499
T = TypeVar("T")


class Refusal(BaseModel):
    error: str
    request_id: str


ERRORS: dict[int | str, dict[str, Any]] = {status: {"model": Refusal} for status in (400, 401, 413, 503, 504)}


@dataclass
class ServerState:
    """What is served: one variant, made from `answerer` and `model_uri` when `variants` is not given; `shadow`
    answers every answered request again, unseen (serving.online.variants)."""

    answerer: InitVar[Answerer | None] = None
    model_uri: InitVar[str] = ""
    # serve.trace: None records no traces, and /feedback answers 404.
    traces: Traces | None = None
    variants: list[Variant] = field(default_factory=list)
    shadow: Variant | None = None
    # serve.variant_salt
    salt: str = "ragtune"

    def __post_init__(self, answerer: Answerer | None, model_uri: str) -> None:
        if not self.variants:
            self.variants = [Variant(served_model(model_uri)[1], model_uri, stated_version(model_uri), answerer=answerer)]

    @property
    def served_uri(self) -> str:
        """The URI a client is told it talks to: the one variant's, or the registered model's when several."""
        first = self.variants[0].uri
        return first if len(self.variants) == 1 else f"models:/{served_model(first)[0]}"

    @property
    def loaded(self) -> bool:
        return all(v.answerer is not None for v in [*self.variants, *([self.shadow] if self.shadow else [])])


def create_app(
    state: ServerState,
    authenticate: Callable[[Request], Principal | None],
    limits: ServeSettings,
) -> FastAPI:
    """`authenticate` gives the request's principal, None when it carries no credentials, and raises
    Unauthenticated when its credentials are not valid."""
    app = FastAPI(title="ragtune", docs_url=None, redoc_url=None)
    app.add_middleware(BodyLimit, max_bytes=limits.max_body_bytes)
    metrics = app.state.metrics = ServerMetrics(lambda: state.traces)
    shadow = app.state.shadow = (Shadow(state.shadow, limits.shadow_concurrency, state.traces, metrics.shadow_answered)
                                 if state.shadow is not None else None)
    pending = threading.BoundedSemaphore(limits.max_pending)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, error: RequestValidationError) -> JSONResponse:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'][1:]) or 'body'}: {e['msg']}" for e in error.errors())
        return refused(request, 400, f"invalid request: {problems}")

    # Starlette's own: FastAPI raises it for a body it cannot parse (invalid UTF-8, JSON nested too deep), and
    # routing for 404 and 405, so those replies carry a request id and a log line like every other refusal.
    @app.exception_handler(StarletteHTTPException)
    async def refusal(request: Request, error: StarletteHTTPException) -> JSONResponse:
        return refused(request, error.status_code, str(error.detail), error.headers)

    def principal_of(request: Request) -> Principal | None:
        """Runs before the body is validated: who asks is settled first, and every refusal is logged as theirs."""
        request.state.request_id = uuid.uuid4().hex
        duplicated = [name for name in IDENTITY_HEADERS if len(request.headers.getlist(name)) > 1]
        if duplicated:
            raise HTTPException(400, f"header {duplicated[0]} is sent more than once; send it once")
        try:
            principal = authenticate(request)
        except Unauthenticated:
            raise HTTPException(401, "unauthenticated: the credentials are not valid") from None
        if principal is None and limits.anonymous != "public":
            raise HTTPException(401, "unauthenticated: send Authorization: Bearer <key>")
        request.state.principal = principal
        return principal

    @app.get("/healthz")
    def healthz() -> dict[str, Any]:
        """`traces`: how many traces (and ratings) went to MLflow, were dropped (the queue was full, or the store
        refused them) and wait in the queue; `shadow_shed`: requests the shadow was too busy to answer."""
        return ({"status": "ok"} | ({"traces": state.traces.counts()} if state.traces else {})
                | ({"shadow_shed": shadow.shed} if shadow else {}))

    ratings: dict[int, Ratings] = {}  # per Traces, made once the model (and its traces) are loaded

    @app.post("/feedback", status_code=202, responses={202: {"model": FeedbackReply}, 404: {"model": Refusal},
                                                       **ERRORS})
    def feedback(
        request: Request, body: FeedbackRequest, principal: Principal | None = Depends(principal_of)
    ) -> FeedbackReply:
        """Rates a reply by the `trace_id` it carried: stored as an MLflow assessment on its trace. Another
        principal's trace id gets the same 404 as an unknown one."""
        traces = state.traces
        accepted = None
        if traces is not None:
            accepted = ratings.setdefault(id(traces), Ratings(traces)).accept(body, principal)
        if accepted is None:
            raise HTTPException(404, UNKNOWN)
        if not accepted:
            raise HTTPException(503, "busy: the trace queue is full; rate it again later")
        metrics.rated(body.rating, body.scale)
        return FeedbackReply(trace_id=body.trace_id)

    # Every method: another method's 405 would reveal the route to a client that gets 404.
    @app.api_route("/metrics", methods=["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"],
                   include_in_schema=False)
    def prometheus(request: Request) -> Response:
        """Prometheus' scrape, for loopback clients (unless a proxy is in front, which makes every client look
        like loopback) and admin keys; anyone else gets the 404 of an unknown path, which does not reveal it."""
        client = request.client.host if request.client else None
        proxied = limits.auth == "header" or limits.trust_proxy
        if proxied or client not in LOOPBACK:
            try:
                principal = authenticate(request)
            except Unauthenticated:
                principal = None
            request.state.principal = principal
            if principal is None or not principal.admin:
                raise StarletteHTTPException(404)
        if request.method not in ("GET", "HEAD"):
            raise StarletteHTTPException(405, headers={"Allow": "GET, HEAD"})
        return Response(metrics.exposition(), media_type=CONTENT_TYPE_LATEST)

    @app.get("/readyz")
    def readyz() -> JSONResponse:
        """`variants`: each served alias's registered version (and the shadow's, which answers unseen)."""
        ready = state.loaded
        served = {v.name: v.version for v in state.variants}
        return JSONResponse({"ready": ready, "model": state.served_uri, "variants": served}
                            | ({"shadow": {state.shadow.name: state.shadow.version}} if state.shadow else {}),
                            status_code=200 if ready else 503)

    async def answer(
        request: Request,
        principal: Principal | None,
        question: str,
        history: list[Turn],
        filters: dict[str, Any] | None,
        on_token: Callable[[str], None] | None = None,
        on_step: Callable[[dict[str, Any]], None] | None = None,
    ) -> dict:
        try:
            check_request(question, [turn.content for turn in history], filters, limits)
        except RequestRefused as e:
            raise HTTPException(e.status, e.reason) from None
        request_id = request.state.request_id
        variant = assign(state.variants, principal, request_id, state.salt)
        if variant.answerer is None:
            raise HTTPException(503, "not ready: the model is loading")
        if not pending.acquire(blocking=False):
            raise HTTPException(503, f"busy: {limits.max_pending} requests already pending")
        start = time.perf_counter()
        record = state.traces.start(question, principal, request_id, variant) if state.traces else None
        trace_id = record.trace_id if record else request_id
        scoped = scoped_filters(principal, filters)
        turns = [t.model_dump() for t in history]
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
            _log(trace_id, principal, status, seconds, reply.get("stages_ms"), question if limits.debug else None,
                 reason)
            request.state.logged = True  # its one line is written: `refused` writes no second one
            metrics.answered(status, variant.name, seconds, reply.get("stages_ms"))
            if record is not None:
                record.finish(status, reply)
        if reason is not None:
            raise HTTPException(status, reason)
        if shadow is not None and not shadow.offer(ShadowJob(question, turns, scoped, principal, request_id)):
            metrics.shadow_shed()
        return reply | {"trace_id": trace_id, "variant": variant.name, "model_version": variant.version}

    # Two shapes per route (a JSON reply, or server-sent events with "stream": true), so the JSON one is declared
    # in `responses` and checked by its model here.
    @app.post("/query", response_model=None, responses={200: {"model": QueryReply}, **ERRORS})
    async def query(
        request: Request, body: QueryRequest, principal: Principal | None = Depends(principal_of)
    ) -> QueryReply | StreamingResponse:
        if body.stream:
            return await streamed(
                lambda on_token, on_step: answer(
                    request, principal, body.question, body.history, body.filters, on_token, on_step
                ),
                QueryEvents(),
            )
        return QueryReply.model_validate(await answer(request, principal, body.question, body.history, body.filters))

    @app.post("/v1/chat/completions", response_model=None, responses={200: {"model": ChatCompletion}, **ERRORS})
    async def chat(
        request: Request, body: ChatRequest, principal: Principal | None = Depends(principal_of)
    ) -> ChatCompletion | StreamingResponse:
        if not body.messages or body.messages[-1].role != "user":
            raise HTTPException(400, "messages: the last message must be the user's question")
        question, history = body.messages[-1].content, body.messages[:-1]
        if body.stream:
            return await streamed(
                lambda on_token, _: answer(request, principal, question, history, None, on_token),
                ChatChunks(state.served_uri),
            )
        reply = QueryReply.model_validate(await answer(request, principal, question, history, None))
        return ChatCompletion(
            id=f"chatcmpl-{reply.trace_id}", created=int(time.time()), model=state.served_uri,
            choices=[ChatChoice(index=0, finish_reason="stop",
                                message=ChatMessageOut(role="assistant", content=reply.answer or ""))],
            ragtune=reply,
        )

    return app


def refused(
    request: Request, status: int, reason: str, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    """A refused request's reply, and its log line (unless `answer` logged the request already): who asked, why,
    and the request id both carry."""
    request_id = getattr(request.state, "request_id", None) or uuid.uuid4().hex
    principal = getattr(request.state, "principal", None)
    request.app.state.metrics.refused(status, request)
    if not getattr(request.state, "logged", False):
        logger.info(json.dumps({
            "request_id": request_id, "tenant": principal.tenant if principal else ANONYMOUS, "status": status,
            "refused": reason, "path": request.url.path,
        }, ensure_ascii=False))
    return JSONResponse({"error": reason, "request_id": request_id}, status_code=status, headers=headers)


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


class BodyLimit:
    """Refuses a body over `max_bytes` with 413 before it is read whole: at once when Content-Length says so, else
    as soon as the bytes received pass the limit."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length", b"0")
        too_large = not declared.isdigit() or int(declared) > self.max_bytes
        received = 0

        async def limited() -> Message:
            nonlocal received
            message = await receive()
            received += len(message.get("body", b""))
            if received > self.max_bytes:
                raise HTTPException(413, f"the body is over serve.max_body_bytes ({self.max_bytes} bytes)")
            return message

        if too_large:
            request = Request(scope)
            await refused(request, 413, f"the body is over serve.max_body_bytes ({self.max_bytes} bytes)")(
                scope, receive, send)
            return
        await self.app(scope, limited, send)


class QueryEvents:
    """/query's server-sent events: `token` per generated piece and `step` per tool call of an agent, then `answer`
    (the reply stream=false gives, with the citation check applied) or `error`."""

    def token(self, text: str) -> str:
        return _sse({"text": text}, "token")

    def step(self, step: dict[str, Any]) -> str:
        return _sse(AgentStep.model_validate(step).model_dump(), "step")

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

    def step(self, step: dict[str, Any]) -> str:
        """OpenAI's chunks have no place for an agent's steps: its clients get the answer only."""
        return ""

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
    run: Callable[[Callable[[str], None], Callable[[dict[str, Any]], None]], Awaitable[dict[str, Any]]],
    frames: QueryEvents | ChatChunks,
) -> StreamingResponse:
    """Starts `run` with a token and a step callback and streams what they produce, in order. A request refused
    before its first event (401, 400, 413, 503) is refused as a plain HTTP error; once the stream has begun, a
    failure is its last event."""
    loop = asyncio.get_running_loop()
    tokens: asyncio.Queue[str | dict[str, Any]] = asyncio.Queue()

    def put(event: str | dict[str, Any]) -> None:
        loop.call_soon_threadsafe(tokens.put_nowait, event)

    def frame(event: str | dict[str, Any]) -> str:
        return frames.token(event) if isinstance(event, str) else frames.step(event)

    task = asyncio.ensure_future(run(put, put))
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
                yield frame(getter.result())
                getter = asyncio.ensure_future(tokens.get())
                continue
            getter.cancel()
            while not tokens.empty():
                yield frame(tokens.get_nowait())
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
    trace_id: str, principal: Principal | None, status: int, seconds: float, stages_ms: dict | None,
    question: str | None, reason: str | None,
) -> None:
    """The line of a request that reached the pipeline; `reason` is the error its reply carries, if any."""
    record: dict[str, Any] = {
        "trace_id": trace_id, "tenant": principal.tenant if principal else ANONYMOUS, "status": status,
        "latency_ms": round(seconds * 1000, 1),
    }
    if reason is not None:
        record["refused"] = reason
    if stages_ms:
        record["stages_ms"] = stages_ms
    if question is not None:
        record["question"] = question
    logger.info(json.dumps(record, ensure_ascii=False))


def bearer(lookup: Callable[[str], Principal | None]) -> Callable[[Request], Principal | None]:
    """`Authorization: Bearer TOKEN`, TOKEN an API key (`keys.get`) or a JWT (`JwtVerifier.principal`); None when
    the request sends no Authorization header."""

    def authenticate(request: Request) -> Principal | None:
        sent = request.headers.get("authorization")
        if sent is None:
            return None
        scheme, _, token = sent.partition(" ")
        principal = lookup(token.strip()) if scheme.lower() == "bearer" and token.strip() else None
        if principal is None:
            raise Unauthenticated
        return principal

    return authenticate


def authenticator(serve: ServeSettings) -> Callable[[Request], Principal | None]:
    """What `serve.auth` names; a mistake in its settings fails here, before anything loads."""
    if serve.auth == "header":
        return proxy_headers(serve.host, serve.trust_proxy)
    lookup = credential_lookup(serve, required=True)
    assert lookup is not None  # required: raises rather than return None
    return bearer(lookup)


def proxy_headers(host: str, trust_proxy: bool) -> Callable[[Request], Principal | None]:
    if host not in LOOPBACK and not trust_proxy:
        raise ConfigError(
            f"config key 'serve.auth': header auth trusts X-Tenant from any client; bind serve.host to loopback "
            f"(not {host}) behind your proxy, or set serve.trust_proxy=true"
        )
    return lambda request: from_headers(request.headers)
