"""Loopback load test of a running `serve.py`: N clients ask golden questions for a bounded time.

    python serve.py model=models:/handbook@production serve.api_keys_file=keys.yaml &
    python -m benchmarks.bench_serve --key k-acme --clients 8 --seconds 60 [--golden data/demo/golden.jsonl]

Prints requests, throughput, p50/p95/p99 seconds and the errors by status (a 503 is the pending bound refusing,
a 504 a timeout). Only loopback addresses: this is a benchmark, not a load generator for other people's servers.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlparse

import numpy as np

from benchmarks.common import ROOT, machine, run_clients
from serving.http.auth import LOOPBACK


def questions(golden: Path) -> list[str]:
    rows = [json.loads(line) for line in golden.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [row["question"] for row in rows if row.get("route") not in ("no_retrieval", "clarify")]


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
    start = time.perf_counter()
    results = run_clients(args.url, args.key, asked, args.clients, args.seconds)
    wall = time.perf_counter() - start
    ok = [seconds for status, seconds in results if status == 200]
    p50, p95, p99 = np.percentile(ok, [50, 95, 99]) if ok else (float("nan"),) * 3
    errors = Counter(status for status, _ in results if status != 200)
    print(json.dumps({
        "machine": machine(),
        "clients": args.clients, "seconds": round(wall, 1), "requests": len(results), "ok": len(ok),
        "throughput_per_s": round(len(ok) / wall, 2),
        "p50_s": round(float(p50), 3), "p95_s": round(float(p95), 3), "p99_s": round(float(p99), 3),
        "errors": {str(k): v for k, v in sorted(errors.items())},
    }, indent=2))
    return 0 if not errors else 1


if __name__ == "__main__":
    sys.exit(main())
