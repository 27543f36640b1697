"""One process of `serve.workers=N`: serve.py's supervisor (serving/supervisor.py) starts it, and uvicorn calls
`worker_app` for its app, which is serve.py's app over the plan serve.py left in the environment
(serving/http/worker_folder.py). It loads the bundles serve.py downloaded, in the background as a single serve.py
does: its /readyz says 503 until every worker has loaded, and the worker whose load completes the set says the
server is ready, once.

A worker that cannot start or load exits with uvicorn's STARTUP_FAILURE code after recording its error: the
supervisor then stops every worker instead of restarting it, and serve.py ends with that error.
"""

from __future__ import annotations

import os
import sys
import threading
import time

import mlflow
from fastapi import FastAPI
from uvicorn.config import STARTUP_FAILURE

from serving.http.app import create_app
from serving.http.auth import authenticator
from serving.http.state import ServerState
from serving.http.worker_folder import PlannedVariant, WorkerPlan
from serving.online.metrics import PUBLISH_SECONDS, ServerMetrics
from serving.online.traces import Traces
from serving.online.variants import Variant
from serving.serve_command import load_variants, log_requests, ready_line
from serving.settings import ServeSettings, compose_serve, serve_settings


def worker_app() -> FastAPI:
    """This worker's app; its variants load in a thread."""
    plan = WorkerPlan.from_env()
    try:
        log_requests()
        serve = serve_settings(compose_serve(plan.argv))
        mlflow.set_tracking_uri(plan.tracking_uri)
        served = [variant_of(planned) for planned in plan.variants]
        shadow = variant_of(plan.shadow) if plan.shadow else None
        traces = (
            Traces.for_model(serve.trace, plan.uri, serve.trace_experiment) if serve.trace.enabled else None
        )
        state = ServerState(traces=traces, variants=served, shadow=shadow, salt=serve.variant_salt)
        app = create_app(state, authenticator(serve), serve, plan.shared)
    except BaseException as e:
        plan.shared.fail(e)
        raise SystemExit(STARTUP_FAILURE) from None
    threading.Thread(target=_load, args=(plan, serve, state), daemon=True).start()
    threading.Thread(target=_publish, args=(app.state.metrics,), daemon=True).start()
    return app


def variant_of(planned: PlannedVariant) -> Variant:
    return Variant(planned.name, planned.uri, planned.version, planned.weight)


def _publish(metrics: ServerMetrics) -> None:
    """The other workers' scrapes read this one's trace and cache counts at most PUBLISH_SECONDS behind."""
    while True:
        metrics.publish()
        time.sleep(PUBLISH_SECONDS)


def _load(plan: WorkerPlan, serve: ServeSettings, state: ServerState) -> None:
    try:
        bundles = plan.bundles
        load_variants(
            [*state.variants, *([state.shadow] if state.shadow else [])], lambda v: bundles[v.uri], say=False
        )
        if plan.shared.mark_ready():
            print(ready_line(plan.uri, serve, state.variants, state.shadow), file=sys.stderr, flush=True)
    except BaseException as e:  # noqa: BLE001 (the supervisor stops the server on this exit code)
        plan.shared.fail(e)
        sys.stderr.flush()
        os._exit(STARTUP_FAILURE)
