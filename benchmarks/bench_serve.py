"""Loopback load test of a running `serve.py`: N clients ask golden questions for a bounded time.

    python serve.py model=models:/handbook@production serve.api_keys_file=keys.yaml &
    python benchmarks/bench_serve.py --key k-acme --clients 8 --seconds 60 [--golden data/demo/golden.jsonl]

Prints requests, throughput, p50/p95/p99 seconds and the errors by status (a 503 is the pending bound refusing,
a 504 a timeout). Only loopback addresses: this is a benchmark, not a load generator for other people's servers.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import threading
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlparse

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
LOOPBACK = {"127.0.0.1", "::1", "localhost"}


def questions(golden: Path) -> list[str]:
    rows = [json.loads(line) for line in golden.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [row["question"] for row in rows if row.get("route") not in ("no_retrieval", "clarify")]


def client_loop(url: str, key: str, asked: Sequence[str], offset: int, stop: float, out: list[tuple[int, float]],
                lock: threading.Lock) -> None:
    with httpx.Client(timeout=120, headers={"Authorization": f"Bearer {key}"}) as http:
        i = offset
        while time.monotonic() < stop:
            start = time.perf_counter()
            try:
                status = http.post(f"{url}/query", json={"question": asked[i % len(asked)]}).status_code
            except httpx.HTTPError:
                status = 0  # no answer at all: connection refused, reset or a client timeout
            with lock:
                out.append((status, time.perf_counter() - start))
            i += 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default="http://127.0.0.1:8080")
    parser.add_argument("--key", required=True, help="an API key from serve.api_keys_file")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--golden", type=Path, default=ROOT / "data" / "demo" / "golden.jsonl")
    args = parser.parse_args(argv)
    if urlparse(args.url).hostname not in LOOPBACK:
        parser.error(f"--url must be a loopback address, not {args.url}")
    asked = questions(args.golden)
    results: list[tuple[int, float]] = []
    lock = threading.Lock()
    stop = time.monotonic() + args.seconds
    threads = [threading.Thread(target=client_loop, args=(args.url, args.key, asked, n * 7, stop, results, lock))
               for n in range(args.clients)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - start
    ok = [seconds for status, seconds in results if status == 200]
    p50, p95, p99 = np.percentile(ok, [50, 95, 99]) if ok else (float("nan"),) * 3
    errors = Counter(status for status, _ in results if status != 200)
    print(json.dumps({
        "machine": f"{platform.machine()}, {len(os.sched_getaffinity(0))} cores",
        "clients": args.clients, "seconds": round(wall, 1), "requests": len(results), "ok": len(ok),
        "throughput_per_s": round(len(ok) / wall, 2),
        "p50_s": round(float(p50), 3), "p95_s": round(float(p95), 3), "p99_s": round(float(p99), 3),
        "errors": {str(k): v for k, v in sorted(errors.items())},
    }, indent=2))
    return 0 if not errors else 1


if __name__ == "__main__":
    sys.exit(main())
