"""`ragtune serve model=models:/NAME@production serve.api_keys_file=keys.yaml` (also `python serve.py ...`).

Overrides use Hydra's syntax against conf/serve.yaml (`serve.port=8081`, `run=RUN_ID`). /healthz answers at once;
/readyz says 503 until the index is loaded and the models are warm.
"""

from __future__ import annotations

import logging
import sys
import threading

from omegaconf import DictConfig

from experiments.runs.config import ConfigError
from serving.bundle import download_bundle
from serving.online.traces import Traces, model_version
from serving.served_pipeline import ServedPipeline
from serving.server import ServerState, authenticator, create_app
from serving.settings import compose_serve, serve_settings


def model_uri(cfg: DictConfig) -> str:
    if (cfg.model is None) == (cfg.run is None):
        raise ConfigError("config keys 'model' / 'run': give one, e.g. model=models:/NAME@production or run=RUN_ID")
    return str(cfg.model) if cfg.model is not None else f"runs:/{cfg.run}/ragtune"


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
    uri, serve = model_uri(cfg), serve_settings(cfg)
    authenticate = authenticator(serve)
    connect(cfg.mlflow.tracking_uri)
    state = ServerState(model_uri=uri)
    if serve.trace.enabled:
        state.traces = Traces.for_model(serve.trace, uri, serve.trace_experiment, model_version(uri))
    app = create_app(state, authenticate, serve)
    server = uvicorn.Server(uvicorn.Config(app, host=serve.host, port=serve.port, log_level="warning"))
    failure: list[BaseException] = []

    def load() -> None:
        try:
            served = ServedPipeline.load(download_bundle(uri))
            if not served.takes_filters:
                raise ConfigError(f"{uri}: its pipeline has no 'filters' input, so requests cannot be kept to their tenant")
            state.answerer = served
            print(f"serve: {uri} is {served.access.summary()}", file=sys.stderr)
            print(f"serve: {uri} is ready on http://{serve.host}:{serve.port}", file=sys.stderr)
        except BaseException as e:  # noqa: BLE001 (reported by main, which stops the server)
            failure.append(e)
            server.should_exit = True

    threading.Thread(target=load, daemon=True).start()
    server.run()
    if failure:
        raise failure[0]
    return 0
