"""The HTTP API over a promoted pipeline (`serve.py`): /query, an OpenAI-compatible /v1/chat/completions, and
/healthz and /readyz; /metrics for Prometheus (loopback or an admin key).

Plain FastAPI rather than Hayhooks: Hayhooks serves a pipeline YAML, but what we serve is a bundle whose store
is filled from a snapshot, whose models are checked against the evaluated ones, and whose every request must be
scoped to its principal before any retriever runs; with Hayhooks all of that would live in a pipeline wrapper
anyway, beside a second server's conventions.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from serving.http.answer_cache import AnswerCache
from serving.http.refusals import BodyLimit, invalid, refusal
from serving.http.routes import router
from serving.http.state import ServerContext, ServerState
from serving.http.worker_folder import WorkerFolder
from serving.online.metrics import ServerMetrics
from serving.online.variants import Shadow
from serving.principals import Principal
from serving.settings import ServeSettings


def create_app(
    state: ServerState,
    authenticate: Callable[[Request], Principal | None],
    limits: ServeSettings,
    workers: WorkerFolder | None = None,
) -> FastAPI:
    """`authenticate` gives the request's principal, None when it carries no credentials, and raises
    Unauthenticated when its credentials are not valid. `workers`: the folder the processes of serve.workers
    share (this app is one of them), None for a server of one process."""
    app = FastAPI(title="ragtune", docs_url=None, redoc_url=None)
    app.add_middleware(BodyLimit, max_bytes=limits.max_body_bytes)
    cache = AnswerCache(limits.cache) if limits.cache.enabled else None
    metrics = app.state.metrics = ServerMetrics(lambda: state.traces, cache.counts if cache else None,
                                                multiprocess=workers is not None)
    shadow = app.state.shadow = (Shadow(state.shadow, limits.shadow_concurrency, state.traces, metrics.shadow_answered)
                                 if state.shadow is not None else None)
    pending = threading.BoundedSemaphore(limits.max_pending)
    app.state.context = ServerContext(state, authenticate, limits, metrics, shadow, pending, cache, workers)
    app.add_exception_handler(RequestValidationError, invalid)
    app.add_exception_handler(StarletteHTTPException, refusal)
    app.include_router(router)
    return app
