"""The serving paths the audit sends its probes through: serve.py's app, the pyfunc model's answerer and a
running `mlflow models serve`, each giving a probe's status and reply alike."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

import httpx
import mlflow
from fastapi.testclient import TestClient
from mlflow.exceptions import MlflowException

from experiments.datasets.demo import DEMO_DIR
from serving.audit.probes import Probe
from serving.http.app import create_app
from serving.http.auth import bearer
from serving.http.state import ServerState
from serving.online import report as online_report
from serving.online.traces import Traces, experiment_name
from serving.online.variants import Answerer
from serving.principals import Principal
from serving.pyfunc_answerer import PyfuncAnswerer
from serving.served_pipeline import ServedPipeline
from serving.settings import CacheSettings, ServeSettings, TraceSettings

KEYS_FILE = DEMO_DIR / "api_keys.yaml"
# The name serve.py's app serves under: its traces go to the experiment ragtune-serve/acl-audit.
MODEL = "acl-audit"
ELSEWHERE = ("203.0.113.5", 50000)  # serve.py's client: an address off loopback (TEST-NET-3)
TWIN = "twin-of-"  # a twin key's prefix (ServeChannel with the cache on)


class Channel(Protocol):
    """A serving path: sends a probe, returns the status and the reply (an error reply for a refusal)."""

    name: str

    def send(self, probe: Probe) -> tuple[int, Any]: ...


class ServeChannel:
    """serve.py's app, in process, as a client off loopback. With a `store` folder every request is traced
    into an MLflow store there with serve.trace.content=full (the most a trace can hold, so the most the
    online report could leak), MLflow points at it (Traces write to the current store), and the audit checks
    the online routes too; without one (tests of the reply layers alone: a trace costs the store tens of
    milliseconds) nothing is traced and they are not checked. With `cache`, serve.cache is on, and every
    tenant key has a twin: another user of its tenant and groups (listed the other way round), which may share
    its cached replies (serving.audit.cache)."""

    name = "serve"

    def __init__(self, answerer: Answerer, keys: Mapping[str, Principal], store: Path | None = None,
                 cache: bool = False) -> None:
        self.folder, self.traces, self.cache = store, None, cache
        self.twins = {f"{TWIN}{key}": replace(p, groups=p.groups[::-1], subject=f"{TWIN}{key}")
                      for key, p in keys.items() if cache and not p.admin}
        if store is not None:
            self.uri = f"sqlite:///{store / 'mlflow.db'}"
            mlflow.set_tracking_uri(self.uri)
            client = mlflow.MlflowClient()
            experiments = (experiment_name(MODEL, None), online_report.REPORT_EXPERIMENT)
            for number, experiment in enumerate(experiments):
                if client.get_experiment_by_name(experiment) is None:  # artifacts in `store`, not ./mlruns
                    artifacts = (store / f"artifacts-{number}").as_uri()
                    client.create_experiment(experiment, artifact_location=artifacts)
            self.traces = Traces.for_model(TraceSettings(content="full"), MODEL, None)
        state = ServerState(answerer, MODEL, self.traces)
        settings = ServeSettings(debug=True, cache=CacheSettings(enabled=cache))
        app = create_app(state, bearer({**keys, **self.twins}.get), settings)
        self.api = TestClient(app, client=ELSEWHERE)

    def call(self, method: str, path: str, key: str | None, body: Any = None) -> httpx.Response:
        """One plain request to any route, as `key` (None: no credentials)."""
        headers = {"authorization": f"Bearer {key}"} if key else {}
        return self.api.request(method, path, json=body, headers=headers)

    def send(self, probe: Probe) -> tuple[int, Any]:
        """Streams the reply (stream=true), so that an agent's steps are checked too: they come as events only."""
        headers = [("authorization", f"Bearer {probe.key}")] if probe.key else []
        streams = isinstance(probe.body, dict)
        body = json.dumps(probe.body | {"stream": True} if streams else probe.body).encode()
        response = self.api.post("/query", content=body, headers=[("content-type", "application/json"), *headers,
                                                                  *probe.headers])
        if response.status_code != 200 or not streams:
            return response.status_code, response.json()
        return _streamed_reply(response.text)


class PyfuncChannel:
    """The pyfunc model's answerer, in process: what `mlflow.pyfunc.load_model(...).predict` runs."""

    name = "pyfunc"

    def __init__(self, served: ServedPipeline, keys: Mapping[str, Principal]) -> None:
        self.answerer = PyfuncAnswerer(served, ServeSettings(api_keys_file=str(KEYS_FILE)), keys.get)

    def send(self, probe: Probe) -> tuple[int, Any]:
        try:
            return 200, self.answerer.predict(pyfunc_input(probe))[0]
        except MlflowException as e:
            return e.get_http_status_code(), {"error": e.message}


class MlflowServeChannel:
    """A running `mlflow models serve` process, over HTTP."""

    name = "mlflow-serve"

    def __init__(self, url: str) -> None:
        self.url = url

    def send(self, probe: Probe) -> tuple[int, Any]:
        body = json.dumps({"inputs": pyfunc_input(probe)}).encode()  # ASCII escapes: a lone surrogate travels as sent
        response = httpx.post(f"{self.url}/invocations", content=body, timeout=120,
                              headers={"content-type": "application/json"})
        reply = response.json()
        return response.status_code, reply["predictions"][0] if response.status_code == 200 else reply


def _streamed_reply(stream: str) -> tuple[int, Any]:
    """/query's events as (status, reply): the `answer` event with the `step` events before it as `steps`, or the
    `error` event's status and message."""
    steps: list[dict[str, Any]] = []
    for block in stream.strip().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines())
        event, data = fields.get("event"), json.loads(fields["data"])
        if event == "step":
            steps.append(data)
        elif event == "answer":
            return 200, data | {"steps": steps}
        elif event == "error":
            return int(data["status"]), {"error": data["error"]}
    raise AssertionError(f"/query's stream ended without an answer or an error: {stream[-200:]!r}")


def pyfunc_input(probe: Probe) -> Any:
    """The probe's body as a pyfunc request: the credentials go into it (the scoring server passes no headers)."""
    if isinstance(probe.body, dict) and probe.key:
        return probe.body | {"credentials": probe.key}
    return probe.body
