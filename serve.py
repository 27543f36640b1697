"""Serve a promoted run: `python serve.py model=models:/NAME@production serve.api_keys_file=keys.yaml`.

Overrides use Hydra's syntax against conf/serve.yaml (`serve.port=8081`, `run=RUN_ID`). /healthz answers at once;
/readyz says 503 until the index is loaded and the models are warm. Exit codes as run.py's: 0 stopped, 2 a mistake
in config or environment (one line on stderr), 1 a bug.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import traceback

for key, value in {"HAYSTACK_TELEMETRY_ENABLED": "False", "MLFLOW_DISABLE_TELEMETRY": "true",
                   "TOKENIZERS_PARALLELISM": "false", "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false"}.items():
    os.environ.setdefault(key, value)

from omegaconf import DictConfig  # noqa: E402
from omegaconf.errors import OmegaConfBaseException  # noqa: E402

from experiments.config import ConfigError, compose  # noqa: E402
from experiments.mlflow_traces import MlflowTracer  # noqa: E402
from pipelines.errors import UserError  # noqa: E402
from serving.bundle import download_bundle  # noqa: E402
from serving.served_pipeline import ServedPipeline  # noqa: E402
from serving.server import ServerState, authenticator, create_app  # noqa: E402
from serving.settings import serve_settings  # noqa: E402

EXIT_BUG, EXIT_USER_ERROR = 1, 2


def model_uri(cfg: DictConfig) -> str:
    if (cfg.model is None) == (cfg.run is None):
        raise ConfigError("config keys 'model' / 'run': give one, e.g. model=models:/NAME@production or run=RUN_ID")
    return str(cfg.model) if cfg.model is not None else f"runs:/{cfg.run}/ragtune"


def main(argv: list[str]) -> int:
    import uvicorn

    from experiments.tracking import connect

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    for noisy in ("haystack", "sentence_transformers", "httpx"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    cfg = compose(argv, config_name="serve")
    uri, serve = model_uri(cfg), serve_settings(cfg)
    authenticate = authenticator(serve)
    connect(cfg.mlflow.tracking_uri)
    if serve.autolog:
        import mlflow
        from haystack import tracing

        mlflow.set_experiment(serve.trace_experiment)
        tracing.tracer.is_content_tracing_enabled = True  # components hand their inputs and outputs to the spans
    state = ServerState(model_uri=uri)
    app = create_app(state, authenticate, serve)
    server = uvicorn.Server(uvicorn.Config(app, host=serve.host, port=serve.port, log_level="warning"))
    failure: list[BaseException] = []

    def load() -> None:
        try:
            served = ServedPipeline.load(download_bundle(uri))
            served.tracer = MlflowTracer() if serve.autolog else None
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


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except (UserError, OmegaConfBaseException) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(EXIT_USER_ERROR)
    except Exception as e:  # noqa: BLE001
        from mlflow.exceptions import MlflowException

        if isinstance(e, MlflowException):  # an unknown model, version or alias
            print(f"error: {e.message}", file=sys.stderr)
            sys.exit(EXIT_USER_ERROR)
        traceback.print_exc()
        sys.exit(EXIT_BUG)
