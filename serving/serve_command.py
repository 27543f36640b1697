"""`ragtune serve model=models:/NAME@production serve.api_keys_file=keys.yaml` (also `python serve.py ...`).

Overrides use Hydra's syntax against conf/serve.yaml (`serve.port=8081`, `run=RUN_ID`). /healthz answers at once;
/readyz says 503 until the index is loaded and the models are warm.
"""

from __future__ import annotations

import logging
import re
import sys
import threading

from pipelines.errors import ConfigError
from serving.bundle import download_bundle
from serving.http.app import create_app
from serving.http.auth import authenticator
from serving.http.state import ServerState
from serving.online.traces import Traces, model_version, served_model
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
    import uvicorn

    from experiments.runs.tracking import connect

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    for noisy in ("haystack", "sentence_transformers", "httpx"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    cfg = compose_serve(argv)
    uri, serve = model_uri(cfg.model, cfg.run), serve_settings(cfg)
    authenticate = authenticator(serve)
    connect(cfg.mlflow.tracking_uri)
    served, shadow = variants_of(uri, serve)
    traces = Traces.for_model(serve.trace, uri, serve.trace_experiment) if serve.trace.enabled else None
    state = ServerState(traces=traces, variants=served, shadow=shadow, salt=serve.variant_salt)
    app = create_app(state, authenticate, serve)
    server = uvicorn.Server(uvicorn.Config(app, host=serve.host, port=serve.port, log_level="warning"))
    failure: list[BaseException] = []

    def load() -> None:
        """Each variant (and the shadow) once, in turn: requests to a variant still loading get 503."""
        try:
            for variant in [*served, *([shadow] if shadow else [])]:
                pipeline = ServedPipeline.load(download_bundle(variant.uri))
                if not pipeline.takes_filters:
                    raise ConfigError(f"{variant.uri}: its pipeline has no 'filters' input, so requests cannot be "
                                      "kept to their tenant")
                variant.index = pipeline.indexed.fingerprint  # first: a reply is never keyed on a half-set variant
                variant.answerer = pipeline
                print(f"serve: {variant.uri} is {pipeline.access.summary()} (version {variant.version})",
                      file=sys.stderr)
            shares = ", ".join(f"{v.name} {v.weight / sum(x.weight for x in served):.0%}" for v in served)
            print(f"serve: {uri} is ready on http://{serve.host}:{serve.port} ({shares}"
                  f"{f'; shadow {shadow.name}' if shadow else ''})", file=sys.stderr)
        except BaseException as e:  # noqa: BLE001 (reported by main, which stops the server)
            failure.append(e)
            server.should_exit = True

    threading.Thread(target=load, daemon=True).start()
    server.run()
    if failure:
        raise failure[0]
    return 0
