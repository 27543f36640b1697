"""Loopback load test of `serve.py`: N clients ask golden questions for a bounded time.

    python serve.py model=models:/handbook@production serve.api_keys_file=keys.yaml &
    python -m benchmarks.bench_serve --key k-acme --clients 8 --seconds 60 [--golden data/demo/golden.jsonl]

Prints requests, throughput, p50/p95/p99 seconds and the errors by status (a 503 is the pending bound refusing,
a 504 a timeout). Only loopback addresses: this is a benchmark, not a load generator for other people's servers.

    python -m benchmarks.bench_serve --workers 1 2 [--clients 8] [--seconds 60] [--key demo-acme-staff] [--out FILE]

starts the servers itself (issue 41: a second worker adds throughput, not a second copy of the index): runs the
shipped defaults on the demo split among its tenants into a temporary MLflow store and promotes the run, then for
each worker count serves it with `python serve.py ... serve.workers=W` (every other serve.* setting at its
default) on a free loopback port, waits for /readyz, and loads it as above. Then it reads memory from
/proc/PID/smaps_rollup: serve.py's own RSS (with more than one worker, the parent that only supervises), the first
worker's RSS, and what each further worker adds: its USS (Private_Clean + Private_Dirty, the pages it alone holds)
and its PSS. Writes docs/results/<today>-bench-serve.md (or --out).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import numpy as np

from benchmarks.common import ROOT, command, machine, machine_line, report_header, run_clients, write_result
from experiments.datasets.demo import DEMO_DIR
from experiments.runs.config import compose
from serving.audit.run import promoted
from serving.http.auth import LOOPBACK
from serving.loopback import free_port, wait_until_up

MODEL = "bench-serve"
# Issue 41's targets at 8 clients on 2 cores: two workers' throughput over one's, and what the second adds.
TARGET_SPEEDUP, TARGET_ADDED = 1.6, 0.30


def questions(golden: Path) -> list[str]:
    rows = [json.loads(line) for line in golden.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [row["question"] for row in rows if row.get("route") not in ("no_retrieval", "clarify")]


def load(url: str, key: str, asked: Sequence[str], clients: int, seconds: float) -> dict[str, Any]:
    """`clients` loopback clients asking for `seconds`: throughput, latency and errors by status."""
    start = time.perf_counter()
    results = run_clients(url, key, asked, clients, seconds)
    wall = time.perf_counter() - start
    ok = [seconds for status, seconds in results if status == 200]
    p50, p95, p99 = np.percentile(ok, [50, 95, 99]) if ok else (float("nan"),) * 3
    errors = Counter(status for status, _ in results if status != 200)
    return {
        "clients": clients, "seconds": round(wall, 1), "requests": len(results), "ok": len(ok),
        "throughput_per_s": round(len(ok) / wall, 2),
        "p50_s": round(float(p50), 3), "p95_s": round(float(p95), 3), "p99_s": round(float(p99), 3),
        "errors": {str(k): v for k, v in sorted(errors.items())},
    }


def smaps_mb(pid: int) -> dict[str, float]:
    """A process's RSS, PSS and USS (the pages it alone holds) in MB, from /proc/PID/smaps_rollup."""
    rollup = {line.split(":")[0]: int(line.split()[1]) for line in
              Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]}
    return {"rss_mb": round(rollup["Rss"] / 1024, 1), "pss_mb": round(rollup["Pss"] / 1024, 1),
            "uss_mb": round((rollup["Private_Clean"] + rollup["Private_Dirty"]) / 1024, 1)}


def children(pid: int) -> list[int]:
    return sorted(int(child) for task in Path(f"/proc/{pid}/task").iterdir()
                  for child in (task / "children").read_text().split())


def processes(pid: int) -> list[int]:
    """`pid` and every process under it: with workers, serve.py, its fork server, the workers forked from that,
    and multiprocessing's resource tracker."""
    return [pid, *(p for child in children(pid) for p in processes(child))]


def cpu_seconds(pids: Sequence[int]) -> float:
    """User and system CPU seconds the processes have used so far, from /proc/PID/stat (fields 14 and 15)."""
    fields = [Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split() for pid in pids]
    return sum(int(f[11]) + int(f[12]) for f in fields) / os.sysconf("SC_CLK_TCK")


def serve_and_load(uri: str, workers: int, folder: Path, key: str, asked: Sequence[str], clients: int,
                   seconds: float) -> dict[str, Any]:
    """serve.py with `workers` on a free loopback port: loaded once ready, then its processes' memory."""
    port, log = free_port(), folder / f"serve-{workers}.log"
    serving = [sys.executable, str(ROOT / "serve.py"), f"model=models:/{MODEL}@production", f"mlflow.tracking_uri={uri}",
               f"serve.workers={workers}", f"serve.api_keys_file={DEMO_DIR / 'api_keys.yaml'}", f"serve.port={port}"]
    with log.open("w") as output:
        server = subprocess.Popen(serving, cwd=folder, stdout=output, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until_up(f"{url}/readyz", server, log, seconds=900)
        before, served = os.getloadavg()[0], processes(server.pid)
        cpu, client = cpu_seconds(served), os.times()
        figures = load(url, key, asked, clients, seconds)
        figures["load_average"] = round((before + os.getloadavg()[0]) / 2, 1)
        client_cpu = sum(os.times()[:2]) - sum(client[:2])
        figures["cores_busy"] = {"server": round((cpu_seconds(served) - cpu) / figures["seconds"], 2),
                                 "client": round(client_cpu / figures["seconds"], 2)}
        pids = [p for child in children(server.pid) for p in children(child)] if workers > 1 else [server.pid]
        figures["memory"] = {"serve_py": smaps_mb(server.pid), "workers": [smaps_mb(pid) for pid in pids],
                             "total_pss_mb": round(sum(smaps_mb(pid)["pss_mb"] for pid in processes(server.pid)))}
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=120)
    return figures


def report(argv: Sequence[str] | None, runs: dict[int, dict[str, Any]], key: str) -> str:
    rows = []
    for workers, got in runs.items():
        memory = got["memory"]
        first, further = memory["workers"][0], memory["workers"][1:]
        added = ", ".join(f"{w['uss_mb']} / {w['pss_mb']}" for w in further) or "-"
        errors = ", ".join(f"{status}: {n}" for status, n in got["errors"].items()) or "0"
        rows.append(
            f"| {workers} | {got['requests']} | {errors} | {got['throughput_per_s']} | {got['p50_s']} / {got['p95_s']} "
            f"| {memory['serve_py']['rss_mb'] if workers > 1 else '-'} | {first['rss_mb']} | {added} "
            f"| {memory['total_pss_mb']} | {got['cores_busy']['server']} / {got['cores_busy']['client']} "
            f"| {got['load_average']} |")
    lines = [
        report_header(command("benchmarks.bench_serve", argv, options=("--out",)), "[serving](../serving.md#workers)"),
        "",
        "# serve.workers: throughput and memory per worker",
        "",
        f"{machine_line()} Served: the shipped defaults (hybrid_rag) on the demo split among its tenants, run and "
        "promoted into a temporary MLflow store, by `python serve.py ... serve.workers=W`, every other serve.* "
        f"setting at its default; {next(iter(runs.values()))['clients']} loopback clients with key `{key}`, each "
        "asking the golden questions in turn for the time given, over keep-alive connections. Memory from "
        "/proc/PID/smaps_rollup after the load, in MB. With W > 1, serve.py's own process (the parent) only "
        "supervises; the workers are forked from a fork server that imported serve.py's libraries once, and what "
        "each further worker adds is its USS (the pages it alone holds; its PSS beside it). The index snapshot and "
        "the GGUF models are mapped, so their pages count once. All processes' PSS: serve.py, its fork server, "
        "the workers and multiprocessing's resource tracker. Cores busy: CPU seconds over the load's wall "
        "seconds, of the server's processes and of this process (the clients). The load average is the 1-minute "
        "one while each W was timed (other jobs share the cores).",
        "",
        "| workers | requests | errors | requests/s | p50 / p95 s | parent RSS | first worker RSS "
        "| further workers USS / PSS | all processes PSS | cores busy: server / client | load average |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
        *rows,
        "",
    ]
    if 1 in runs and 2 in runs:
        one, two = runs[1], runs[2]
        speedup = two["throughput_per_s"] / one["throughput_per_s"] if one["throughput_per_s"] else float("nan")
        first, second = two["memory"]["workers"][:2]
        added = second["uss_mb"] / first["rss_mb"]
        lines += [
            f"Two workers serve {speedup:.2f}x the requests a second of one "
            f"({'meets' if speedup >= TARGET_SPEEDUP else 'misses'} the target of {TARGET_SPEEDUP}x); the second "
            f"worker adds {second['uss_mb']} MB of its own, {added:.1%} of the first worker's RSS "
            f"({'meets' if added <= TARGET_ADDED else 'misses'} the target of {TARGET_ADDED:.0%}); all processes "
            f"together hold {two['memory']['total_pss_mb']} MB against {one['memory']['total_pss_mb']} MB for one. "
            f"One worker already kept {one['cores_busy']['server']} of the machine's {os.cpu_count()} cores busy "
            f"(its pipeline's numpy and llama.cpp threads), the clients {one['cores_busy']['client']}, so a second "
            f"worker could add at most {os.cpu_count() / (one['cores_busy']['server'] + one['cores_busy']['client']):.2f}x "
            "here.",
            "",
        ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default="http://127.0.0.1:8080")
    parser.add_argument("--key", help="an API key from serve.api_keys_file (with --workers: demo-acme-staff)")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--golden", type=Path, default=ROOT / "data" / "demo" / "golden.jsonl")
    parser.add_argument("--workers", type=int, nargs="+", metavar="W",
                        help="serve the tenant-split demo with each of these serve.workers, instead of --url")
    parser.add_argument("--out", type=Path, default=None,
                        help="with --workers: the report (default docs/results/<today>-bench-serve.md)")
    args = parser.parse_args(argv)
    if urlparse(args.url).hostname not in LOOPBACK:
        parser.error(f"--url must be a loopback address, not {args.url}")
    asked = questions(args.golden)
    if args.workers:
        key = args.key or "demo-acme-staff"
        with tempfile.TemporaryDirectory(prefix="ragtune-bench-serve-") as folder:
            built = compose([f"dataset.meta_file={DEMO_DIR / 'tenants.jsonl'}", "eval.trace_sample=0"])
            uri = promoted(built, Path(folder), MODEL)
            runs = {w: serve_and_load(uri, w, Path(folder), key, asked, args.clients, args.seconds)
                    for w in args.workers}
        print(json.dumps(runs, indent=2))
        write_result(report(argv, runs, key), args.out, "bench-serve")
        return 0 if not any(run["errors"] for run in runs.values()) else 1
    if args.key is None:
        parser.error("--key is required against a running server (--url)")
    figures = load(args.url, args.key, asked, args.clients, args.seconds)
    print(json.dumps({"machine": machine()} | figures, indent=2))
    return 0 if not figures["errors"] else 1


if __name__ == "__main__":
    sys.exit(main())
