"""What serve.py's app serves (ServerState, given to create_app) and what its routes share (ServerContext, made
once per app by create_app and read by every route through the `context_of` dependency)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import InitVar, dataclass, field

from fastapi import Request

from serving.http.answer_cache import AnswerCache
from serving.http.worker_folder import WorkerFolder
from serving.online.feedback import Ratings
from serving.online.metrics import ServerMetrics
from serving.online.traces import Traces, served_model, stated_version
from serving.online.variants import Answerer, Shadow, Variant
from serving.principals import Principal
from serving.settings import ServeSettings


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


@dataclass(frozen=True)
class ServerContext:
    """One app's state and limits, and what its routes keep between requests: `pending` bounds the requests
    waiting for the pipeline, `cache` keeps replies for repeated questions (serve.cache), `ratings` holds a Ratings
    per Traces (made once the model and its traces are loaded). `authenticate` gives the request's principal, None
    when it carries no credentials, and raises Unauthenticated when its credentials are not valid."""

    state: ServerState
    authenticate: Callable[[Request], Principal | None]
    limits: ServeSettings
    metrics: ServerMetrics
    shadow: Shadow | None
    pending: threading.BoundedSemaphore
    # serve.cache: None when it is off.
    cache: AnswerCache | None = None
    # serve.workers above 1: what the worker processes share (their ready marks); None for one process.
    workers: WorkerFolder | None = None
    ratings: dict[int, Ratings] = field(default_factory=dict)


async def context_of(request: Request) -> ServerContext:
    """The dependency every route reads its app's context through. Async, as `principal_of`: FastAPI runs a plain
    function dependency in its thread pool, and the hand-offs cost a cached reply more than the cache itself."""
    return request.app.state.context
