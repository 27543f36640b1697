"""`ragtune serve model=models:/NAME@production serve.api_keys_file=keys.yaml` (also `python serve.py ...`).

Overrides use Hydra's syntax against conf/serve.yaml (`serve.port=8081`, `run=RUN_ID`). /healthz answers at once;
/readyz says 503 until the index is loaded and the models are warm. `serve.workers=N` runs N processes on the
port, each loading the bundles serve.py downloaded once.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NoReturn

import uvicorn

from pipelines.access import IndexAccess
from pipelines.errors import ConfigError
from serving.bundle import download_bundle, read_bundle
from serving.http.app import create_app
from serving.http.auth import authenticator
from serving.http.state import ServerState
from serving.http.worker_folder import PLAN_ENV, PlannedVariant, WorkerFolder, WorkerPlan
from serving.online.metrics import MULTIPROC_ENV
from serving.online.traces import Traces, model_version, served_model, trace_experiment
from serving.online.variants import Variant
from serving.served_pipeline import ServedPipeline
from serving.settings import ServeSettings, compose_serve, serve_settings


def model_uri(model: str | None, run: str | None) -> str:
    """The served model's URI from conf/serve.yaml's `model` or `run` (exactly one)."""
    if (model is None) == (run is None):
        raise ConfigError("config keys 'model' / 'run': give one, e.g. model=models:/NAME@production or run=RUN_ID")
    return str(model) if model is not None else f"runs:/{run}/ragtune"


def variants_of(uri: str, serve: ServeSettings) -> tuple[list[Variant], Variant | None]:
    """The variants serve.variants names (each an alias of `uri`'s registered model), else `uri` alone; and the
    shadow serve.shadow names. Versions are looked up now, so a missing alias fails before anything loads."""
    name, alias = served_model(uri)
    if (serve.variants or serve.shadow) and not uri.startswith("models:/"):
        raise ConfigError("config keys 'serve.variants' / 'serve.shadow': name aliases of a registered model, so "
                          f"serve model=models:/NAME, not {uri}")
    if serve.variants and re.fullmatch(r"models:/[^@/]+", uri) is None:
        raise ConfigError(f"config key 'serve.variants': each variant is an alias of model={uri}; give the model "
                          f"without one (model=models:/{name})")

    def of(alias_name: str, weight: float = 1.0) -> Variant:
        alias_uri = f"models:/{name}@{alias_name}"
        return Variant(alias_name, alias_uri, model_version(alias_uri), weight)

    served = [of(a, w) for a, w in serve.variants.items()] if serve.variants else [
        Variant(alias, uri, model_version(uri))]
    return served, of(serve.shadow) if serve.shadow else None


def main(argv: list[str]) -> int:
    if argv in (["-h"], ["--help"]):
        print(__doc__.strip())
        return 0
    from experiments.runs.tracking import connect

    log_requests()
    cfg = compose_serve(argv)
    uri, serve = model_uri(cfg.model, cfg.run), serve_settings(cfg)
    authenticate = authenticator(serve)
    tracking_uri = connect(cfg.mlflow.tracking_uri)
    served, shadow = variants_of(uri, serve)
    if serve.workers > 1:
        return serve_workers(argv, uri, serve, served, shadow, tracking_uri)
    traces = Traces.for_model(serve.trace, uri, serve.trace_experiment) if serve.trace.enabled else None
    state = ServerState(traces=traces, variants=served, shadow=shadow, salt=serve.variant_salt)
    app = create_app(state, authenticate, serve)
    server = uvicorn.Server(uvicorn.Config(app, host=serve.host, port=serve.port, log_level="warning"))
    failure: list[BaseException] = []

    def load() -> None:
        """Each variant (and the shadow) once, in turn: requests to a variant still loading get 503."""
        try:
            load_variants([*served, *([shadow] if shadow else [])], lambda variant: download_bundle(variant.uri),
                          say=True)
            print(ready_line(uri, serve, served, shadow), file=sys.stderr)
        except BaseException as e:  # noqa: BLE001 (reported by main, which stops the server)
            failure.append(e)
            server.should_exit = True

    threading.Thread(target=load, daemon=True).start()
    server.run()
    if failure:
        raise failure[0]
    return 0


def log_requests() -> None:
    """serve.py's log: its own lines (one JSON line per request) at INFO, its libraries' from WARNING."""
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    for noisy in ("haystack", "sentence_transformers", "httpx"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def load_variants(variants: Sequence[Variant], bundle_of: Callable[[Variant], Path], say: bool) -> None:
    """Loads each variant's pipeline from its bundle, in turn, and hands it to the variant (requests to one still
    loading get 503); `say`: prints each one's tenancy as it loads."""
    for variant in variants:
        pipeline = ServedPipeline.load(bundle_of(variant))
        if not pipeline.takes_filters:
            raise ConfigError(f"{variant.uri}: its pipeline has no 'filters' input, so requests cannot be "
                              "kept to their tenant")
        variant.index = pipeline.indexed.fingerprint  # first: a reply is never keyed on a half-set variant
        variant.answerer = pipeline
        if say:
            print(tenancy_line(variant, pipeline.access), file=sys.stderr)


def tenancy_line(variant: Variant, access: IndexAccess) -> str:
    return f"serve: {variant.uri} is {access.summary()} (version {variant.version})"


def ready_line(uri: str, serve: ServeSettings, served: Sequence[Variant], shadow: Variant | None) -> str:
    shares = ", ".join(f"{v.name} {v.weight / sum(x.weight for x in served):.0%}" for v in served)
    workers = f"; {serve.workers} workers" if serve.workers > 1 else ""
    return (f"serve: {uri} is ready on http://{serve.host}:{serve.port} ({shares}"
            f"{f'; shadow {shadow.name}' if shadow else ''}{workers})")


def serve_workers(
    argv: list[str], uri: str, serve: ServeSettings, served: list[Variant], shadow: Variant | None,
    tracking_uri: str,
) -> NoReturn:
    """serve.workers above 1: what can fail early fails here, once (each bundle is downloaded and checked, the
    traces' experiment made); then this process becomes the supervisor (serving/supervise.py), which holds none
    of the libraries imported here, and runs the workers (serving/serve_worker.py), each loading the bundles
    downloaded here."""
    planned = []
    for variant in [*served, *([shadow] if shadow else [])]:
        bundle = download_bundle(variant.uri)
        print(tenancy_line(variant, read_bundle(bundle).access), file=sys.stderr)
        planned.append(PlannedVariant(variant.name, variant.uri, variant.version, variant.weight, str(bundle)))
    if serve.trace.enabled:
        trace_experiment(uri, serve.trace_experiment)
    shared = WorkerFolder.make(serve.workers)  # the supervisor removes it when it ends
    plan = WorkerPlan(argv, uri, tracking_uri, str(shared.path), serve.workers, serve.host, serve.port,
                      planned[: len(served)], planned[len(served)] if shadow else None)
    os.environ |= {PLAN_ENV: plan.to_env(), MULTIPROC_ENV: str(shared.metrics)}  # the workers inherit them
    # The supervisor and its workers import this very tree, wherever serve.py was started from.
    tree = str(Path(__file__).resolve().parents[1])
    os.environ["PYTHONPATH"] = os.pathsep.join([tree, *filter(None, [os.environ.get("PYTHONPATH")])])
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, [sys.executable, "-m", "serving.supervise"])
