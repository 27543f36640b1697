"""serve.py's routes: /query and OpenAI's /v1/chat/completions (answering.py answers both), /feedback, /healthz,
/readyz, and /metrics for Prometheus (loopback or an admin key). Each reads its app through `context_of`."""

from __future__ import annotations

import time
from typing import Any, TypeVar

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.exceptions import HTTPException as StarletteHTTPException

from serving.http.answering import answer
from serving.http.auth import LOOPBACK, principal_of
from serving.http.refusals import ERRORS, Refusal
from serving.http.state import ServerContext, context_of
from serving.http.streaming import ChatChunks, QueryEvents, streamed
from serving.online.feedback import UNKNOWN, FeedbackReply, FeedbackRequest, Ratings
from serving.principals import Principal, Unauthenticated
from serving.replies import ChatChoice, ChatCompletion, ChatMessageOut, QueryReply
from serving.request_schema import ChatRequest, QueryRequest

router = APIRouter()
# Says whether serve.cache answered a /query or chat reply: hit or miss.
CACHE_HEADER = "X-Ragtune-Cache"


@router.get("/healthz")
def healthz(context: ServerContext = Depends(context_of)) -> dict[str, Any]:
    """`traces`: how many traces (and ratings) went to MLflow, were dropped (the queue was full, or the store
    refused them) and wait in the queue; `shadow_shed`: requests the shadow was too busy to answer."""
    state, shadow = context.state, context.shadow
    return ({"status": "ok"} | ({"traces": state.traces.counts()} if state.traces else {})
            | ({"shadow_shed": shadow.shed} if shadow else {}))


@router.post("/feedback", status_code=202, responses={202: {"model": FeedbackReply}, 404: {"model": Refusal},
                                                      **ERRORS})
def feedback(
    request: Request, body: FeedbackRequest, principal: Principal | None = Depends(principal_of),
    context: ServerContext = Depends(context_of),
) -> FeedbackReply:
    """Rates a reply by the `trace_id` it carried: stored as an MLflow assessment on its trace. Another
    principal's trace id gets the same 404 as an unknown one."""
    traces = context.state.traces
    accepted = None
    if traces is not None:
        accepted = context.ratings.setdefault(id(traces), Ratings(traces)).accept(body, principal)
    if accepted is None:
        raise HTTPException(404, UNKNOWN)
    if not accepted:
        raise HTTPException(503, "busy: the trace queue is full; rate it again later")
    context.metrics.rated(body.rating, body.scale)
    return FeedbackReply(trace_id=body.trace_id)


# Every method: another method's 405 would reveal the route to a client that gets 404.
@router.api_route("/metrics", methods=["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"],
                  include_in_schema=False)
def prometheus(request: Request, context: ServerContext = Depends(context_of)) -> Response:
    """Prometheus' scrape, for loopback clients (unless a proxy is in front, which makes every client look
    like loopback) and admin keys; anyone else gets the 404 of an unknown path, which does not reveal it."""
    client = request.client.host if request.client else None
    proxied = context.limits.auth == "header" or context.limits.trust_proxy
    if proxied or client not in LOOPBACK:
        try:
            principal = context.authenticate(request)
        except Unauthenticated:
            principal = None
        request.state.principal = principal
        if principal is None or not principal.admin:
            raise StarletteHTTPException(404)
    if request.method not in ("GET", "HEAD"):
        raise StarletteHTTPException(405, headers={"Allow": "GET, HEAD"})
    return Response(context.metrics.exposition(), media_type=CONTENT_TYPE_LATEST)


@router.get("/readyz")
def readyz(context: ServerContext = Depends(context_of)) -> JSONResponse:
    """`variants`: each served alias's registered version (and the shadow's, which answers unseen). With
    serve.workers above 1, ready once every worker has loaded, whichever worker answers."""
    state, workers = context.state, context.workers
    ready = state.loaded and (workers is None or workers.all_ready())
    served = {v.name: v.version for v in state.variants}
    return JSONResponse({"ready": ready, "model": state.served_uri, "variants": served}
                        | ({"shadow": {state.shadow.name: state.shadow.version}} if state.shadow else {}),
                        status_code=200 if ready else 503)


# Two shapes per route (a JSON reply, or server-sent events with "stream": true), so the JSON one is declared
# in `responses` and checked by its model here.
@router.post("/query", response_model=None, responses={200: {"model": QueryReply}, **ERRORS})
async def query(
    request: Request, response: Response, body: QueryRequest, principal: Principal | None = Depends(principal_of),
    context: ServerContext = Depends(context_of),
) -> QueryReply | StreamingResponse:
    if body.stream:
        return marked(request, await streamed(
            lambda on_token, on_step: answer(
                request, context, principal, body.question, body.history, body.filters, on_token, on_step
            ),
            QueryEvents(),
        ))
    reply = QueryReply.model_validate(
        await answer(request, context, principal, body.question, body.history, body.filters))
    marked(request, response)
    return reply


@router.post("/v1/chat/completions", response_model=None, responses={200: {"model": ChatCompletion}, **ERRORS})
async def chat(
    request: Request, response: Response, body: ChatRequest, principal: Principal | None = Depends(principal_of),
    context: ServerContext = Depends(context_of),
) -> ChatCompletion | StreamingResponse:
    if not body.messages or body.messages[-1].role != "user":
        raise HTTPException(400, "messages: the last message must be the user's question")
    question, history = body.messages[-1].content, body.messages[:-1]
    if body.stream:
        return marked(request, await streamed(
            lambda on_token, _: answer(request, context, principal, question, history, None, on_token),
            ChatChunks(context.state.served_uri),
        ))
    reply = QueryReply.model_validate(await answer(request, context, principal, question, history, None))
    marked(request, response)
    return ChatCompletion(
        id=f"chatcmpl-{reply.trace_id}", created=int(time.time()), model=context.state.served_uri,
        choices=[ChatChoice(index=0, finish_reason="stop",
                            message=ChatMessageOut(role="assistant", content=reply.answer or ""))],
        ragtune=reply,
    )


R = TypeVar("R", bound=Response)


def marked(request: Request, response: R) -> R:
    """With serve.cache on, `X-Ragtune-Cache: hit` or `miss` (the reply's `cached` says it too). A stream's
    request has passed the cache by the time its response is made: `streamed` waits for the first event or the
    end, and the answer looks in the cache before it awaits anything."""
    outcome = getattr(request.state, "cache", None)
    if outcome is not None:
        response.headers[CACHE_HEADER] = outcome
    return response
