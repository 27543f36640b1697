"""How serve.py refuses a request: one JSON reply shape (`Refusal`) and one log line, whoever refuses it (a route,
FastAPI's validation, Starlette's routing, or the body limit)."""

from __future__ import annotations

import json
import logging
import os
import uuid
from collections.abc import Mapping
from typing import Any

from fastapi import HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

logger = logging.getLogger("ragtune.serve")
ANONYMOUS = "anonymous"


class Refusal(BaseModel):
    error: str
    request_id: str


ERRORS: dict[int | str, dict[str, Any]] = {status: {"model": Refusal} for status in (400, 401, 413, 503, 504)}


def refused(
    request: Request, status: int, reason: str, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    """A refused request's reply, and its log line (unless `answer` logged the request already): who asked, why,
    and the request id both carry."""
    request_id = getattr(request.state, "request_id", None) or uuid.uuid4().hex
    principal = getattr(request.state, "principal", None)
    request.app.state.metrics.refused(status, request)
    if not getattr(request.state, "logged", False):
        log_request(request, {
            "request_id": request_id, "tenant": principal.tenant if principal else ANONYMOUS, "status": status,
            "refused": reason, "path": request.url.path,
        })
    return JSONResponse({"error": reason, "request_id": request_id}, status_code=status, headers=headers)


def log_request(request: Request, record: dict[str, Any]) -> None:
    """A request's one JSON log line; with serve.workers above 1 it names the worker process (`worker`: its
    pid) that answered."""
    if request.app.state.context.workers is not None:
        record["worker"] = os.getpid()
    logger.info(json.dumps(record, ensure_ascii=False))


async def invalid(request: Request, error: RequestValidationError) -> JSONResponse:
    """A body its model rejects: 400, naming each field and what is wrong with it."""
    problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'][1:]) or 'body'}: {e['msg']}" for e in error.errors())
    return refused(request, 400, f"invalid request: {problems}")


async def refusal(request: Request, error: StarletteHTTPException) -> JSONResponse:
    """Starlette's own: FastAPI raises it for a body it cannot parse (invalid UTF-8, JSON nested too deep), and
    routing for 404 and 405, so those replies carry a request id and a log line like every other refusal."""
    return refused(request, error.status_code, str(error.detail), error.headers)


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
