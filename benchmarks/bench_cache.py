"""serve.cache over HTTP on loopback: a repeated question answered from the answer cache, against questions the
pipeline answers (issue 41: a hit's p95 at most 5 ms).

    python -m benchmarks.bench_cache [--repeats 200] [--misses 20] [--key demo-acme-staff] [--out FILE]
                                     [run.py overrides]

Serves the demo split among its tenants (data/demo/tenants.jsonl, keys data/demo/api_keys.yaml), built with the
overrides (none: the shipped defaults, hybrid_rag), in a server process of its own: serve.py's app under uvicorn
on a free loopback port, serve.cache on, every other serve.* setting at its default (each request logged, and
traced into a temporary MLflow store: a root span, and for a tenth of the misses a span per component); then once
more with serve.trace.enabled=false. This process is the client, over one keep-alive connection: it asks
`--misses` golden questions once each (each a miss: the pipeline answers), then the first of them `--repeats`
times more (each a hit), timing each request from send to parsed reply, and as many GET /healthz (the floor of
any request to this server on this machine); the server's own log gives each hit's time inside the app. /metrics
gives the cache's counts. Writes docs/results/<today>-bench-cache.md (or --out).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import mlflow
import uvicorn

from benchmarks.common import ROOT, command, machine_line, percentiles, report_header, write_result
from experiments.datasets.demo import DEMO_DIR
from experiments.runs.config import compose, validate
from experiments.runs.indexed import prepare_pipeline
from serving.http.app import create_app
from serving.http.auth import authenticator
from serving.http.state import ServerState
from serving.loopback import free_port, wait_until_up
from serving.online.traces import Traces, experiment_name
from serving.served_pipeline import ServedPipeline
from serving.settings import CacheSettings, ServeSettings, TraceSettings

MODEL = "bench-cache"
TARGET_P95_MS = 5.0
SETTINGS = {"traced": "serve.py's defaults (traces on)", "untraced": "serve.trace.enabled=false"}


def serve(port: int, folder: Path, traced: bool, overrides: Sequence[str]) -> None:
    """The server process: the tenant-split demo served by serve.py's app with serve.cache on, until killed."""
    logging.basicConfig(level=logging.INFO, format="%(message)s", filename=folder / "requests.log")
    cfg = compose([f"dataset.meta_file={DEMO_DIR / 'tenants.jsonl'}", "eval.trace_sample=0", *overrides])
    served = ServedPipeline.warm(prepare_pipeline(validate(cfg)))
    traces = None
    if traced:
        mlflow.set_tracking_uri(f"sqlite:///{folder / 'mlflow.db'}")
        mlflow.MlflowClient().create_experiment(experiment_name(MODEL, None), (folder / "artifacts").as_uri())
        traces = Traces.for_model(TraceSettings(), MODEL, None)
    settings = ServeSettings(
        port=port, api_keys_file=str(DEMO_DIR / "api_keys.yaml"), cache=CacheSettings(enabled=True)
    )
    state = ServerState(served, MODEL, traces)
    state.variants[0].index = served.indexed.fingerprint
    uvicorn.run(
        create_app(state, authenticator(settings), settings), host="127.0.0.1", port=port, log_level="warning"
    )


def timed(
    http: httpx.Client, url: str, bodies: Sequence[dict[str, Any] | None], cached: bool | None
) -> list[float]:
    """Milliseconds per request: POST /query with each body (each must be answered, and `cached` as expected),
    or GET /healthz for None."""
    spent = []
    for body in bodies:
        start = time.perf_counter()
        reply = http.post(f"{url}/query", json=body) if body is not None else http.get(f"{url}/healthz")
        got = reply.json()
        spent.append((time.perf_counter() - start) * 1000)
        if reply.status_code != 200 or (body is not None and got.get("cached") is not cached):
            raise RuntimeError(f"{body}: {reply.status_code}, cached {got.get('cached')}, expected {cached}")
    return spent


def measure(traced: bool, questions: Sequence[str], repeats: int, key: str, overrides: Sequence[str]) -> dict:
    """One server (traced or not), warmed, then timed: misses, hits, /healthz; the hits' time in the app from its
    log, and the cache's counts from /metrics."""
    with tempfile.TemporaryDirectory(prefix="ragtune-bench-cache-") as folder:
        port, log = free_port(), Path(folder) / "server.log"
        serving = [sys.executable, "-m", "benchmarks.bench_cache", "--serve", str(port), folder, str(traced)]
        with log.open("w") as output:
            server = subprocess.Popen(
                [*serving, *overrides], cwd=ROOT, stdout=output, stderr=subprocess.STDOUT
            )
        try:
            url = f"http://127.0.0.1:{port}"
            wait_until_up(f"{url}/readyz", server, log, seconds=600)
            load = os.getloadavg()[0]
            with httpx.Client(timeout=120, headers={"Authorization": f"Bearer {key}"}) as http:
                figures = {
                    "miss": timed(http, url, [{"question": q} for q in questions], cached=False),
                    "hit": timed(http, url, [{"question": questions[0]}] * repeats, cached=True),
                    "healthz": timed(http, url, [None] * repeats, cached=None),
                }
                exposition = http.get(f"{url}/metrics").text
        finally:
            server.terminate()
            server.wait(timeout=60)
        lines = [
            json.loads(line)
            for line in (Path(folder) / "requests.log").read_text().splitlines()
            if line.startswith("{")
        ]
    figures["hit in the app"] = [line["latency_ms"] for line in lines if line.get("cache") == "hit"]
    counts = {
        line.split()[0]: int(float(line.split()[-1]))
        for line in exposition.splitlines()
        if line.startswith("ragtune_cache_") and not line.startswith("ragtune_cache_bytes")
    }
    load = round((load + os.getloadavg()[0]) / 2, 1)
    return {name: percentiles(values) for name, values in figures.items()} | {"counts": counts, "load": load}


def report(argv: Sequence[str] | None, figures: dict[str, dict], key: str, overrides: Sequence[str]) -> str:
    rows = [
        f"| {SETTINGS[setting]} | {what} | {got[name]['n']} | {got[name]['p50_ms']:.2f} | {got[name]['p95_ms']:.2f} |"
        for setting, got in figures.items()
        for name, what in (
            ("hit", "hit: answered from the cache (one question again)"),
            ("hit in the app", "hit, inside the app (its log line's latency_ms, to 0.1 ms)"),
            ("healthz", "GET /healthz: the floor of any request"),
            ("miss", "miss: the pipeline answers (each golden question once)"),
        )
    ]
    hit = figures["traced"]["hit"]["p95_ms"]
    counts = "; ".join(
        f"{SETTINGS[s]}: "
        + ", ".join(f"{k.removeprefix('ragtune_cache_')} {v}" for k, v in got["counts"].items())
        for s, got in figures.items()
    )
    return "\n".join(
        [
            report_header(
                command("benchmarks.bench_cache", argv, options=("--out",)), "[serving](../serving.md)"
            ),
            "",
            "# serve.cache: a repeated question from the answer cache",
            "",
            f"{machine_line()} Served: the tenant-split demo ({' '.join(overrides) or 'the shipped defaults: hybrid_rag'}) "
            "by serve.py's app under uvicorn in a process of its own, serve.cache on, every other serve.* setting at its "
            f"default (log lines included); the client in this process, one keep-alive loopback connection, key `{key}`. "
            "Milliseconds from send to parsed reply, unless said. The load average while each server was timed "
            "(other jobs share the cores): "
            + ", ".join(f"{SETTINGS[setting]} {got['load']}" for setting, got in figures.items())
            + ".",
            "",
            "| serve settings | requests | n | p50 ms | p95 ms |",
            "|---|---|---|---|---|",
            *rows,
            "",
            f"With serve.py's defaults, a hit's p95 is {hit:.2f} ms: it "
            f"{'meets' if hit <= TARGET_P95_MS else 'misses'} the target of {TARGET_P95_MS:g} ms; inside the app it "
            f"takes {figures['traced']['hit in the app']['p95_ms']:.1f} ms at p95, the rest is the HTTP path, whose "
            f"floor on this machine GET /healthz gives. /metrics afterwards: {counts}.",
            "",
        ]
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=200, help="hits timed: the first question asked again")
    parser.add_argument("--misses", type=int, default=20, help="golden questions asked once each")
    parser.add_argument("--key", default="demo-acme-staff", help="a key of data/demo/api_keys.yaml")
    parser.add_argument(
        "--out", type=Path, default=None, help="the report (default docs/results/<today>-bench-cache.md)"
    )
    parser.add_argument("--serve", nargs=3, help=argparse.SUPPRESS)  # the server process: PORT FOLDER TRACED
    args, overrides = parser.parse_known_args(argv)
    if args.serve:
        serve(int(args.serve[0]), Path(args.serve[1]), args.serve[2] == "True", overrides)
        return 0
    golden = (DEMO_DIR / "golden.jsonl").read_text(encoding="utf-8").splitlines()
    questions = list(dict.fromkeys(json.loads(line)["question"] for line in golden if line.strip()))[
        : args.misses
    ]
    figures = {
        "traced": measure(True, questions, args.repeats, args.key, overrides),
        "untraced": measure(False, questions, args.repeats, args.key, overrides),
    }
    print(json.dumps(figures, indent=2))
    write_result(report(argv, figures, args.key, overrides), args.out, "bench-cache")
    return 0


if __name__ == "__main__":
    sys.exit(main())
