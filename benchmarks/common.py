"""What several benchmark scripts need alike, in one place so their reports and figures cannot drift apart:
where the repository is, the machine line, a results report's header and file, a `run.py` job's outputs,
timing, and loopback clients against a running server."""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

import httpx
import numpy as np

from pipelines.run_layout import JobFolder

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results"


# --- the machine --------------------------------------------------------------------------------------------


def cores() -> int:
    """The cores this process may run on (its CPU affinity, where the OS has one), which bound its figures."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def machine() -> str:
    return f"{platform.machine()}, {cores()} cores"


def machine_line() -> str:
    """The sentence a report opens its description with."""
    return f"Machine: {machine()}, Python {platform.python_version()}."


# --- a report under docs/results/ ---------------------------------------------------------------------------


def command(
    module: str, argv: Sequence[str] | None, flags: Sequence[str] = (), options: Sequence[str] = ()
) -> str:
    """How a report names the command that wrote it: `python -m benchmarks.NAME ARGS`, ARGS being the arguments
    `main` was given, else the command line's, less those that change nothing in the report: the `flags`
    (e.g. --reuse) and the `options` with their values (e.g. --out PATH)."""
    given = list(sys.argv[1:] if argv is None else argv)
    shown = [
        arg
        for i, arg in enumerate(given)
        if arg not in flags and arg not in options and (i == 0 or given[i - 1] not in options)
    ]
    return " ".join(["python -m", module, *shown])


def report_header(command_line: str, *links: str) -> str:
    """A report's first line: its command (tests/test_docs.py checks every report has one), then its links."""
    shown = ("[all results](README.md)", "[README](../../README.md)", *links)
    return f"Command: `{command_line}` · " + " · ".join(shown)


def write_result(text: str, out: Path | None, name: str, file: TextIO | None = None) -> None:
    """Writes the report to `out`, else to docs/results/<today>-<name>.md, and says where (on stdout, or on `file`
    for scripts whose stdout is the report)."""
    path = out or RESULTS / f"{datetime.date.today().isoformat()}-{name}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    print(f"wrote {path}", file=file)


# --- a run.py job -------------------------------------------------------------------------------------------


def run_job(
    overrides: Sequence[str], job: Path, reuse: bool = False
) -> tuple[dict[str, float], list[dict[str, Any]]]:
    """Runs `run.py` with the overrides into `job` (the index cache is shared) and returns its metrics.json
    and per-question records.

    `reuse` reads a finished job already in `job` instead (delete the folder after changing its config)."""
    folder = JobFolder(job)
    if not (reuse and folder.finished):
        job_command = [sys.executable, str(ROOT / "run.py"), *overrides, f"hydra.run.dir={job}"]
        subprocess.run(job_command, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    return folder.metrics(), folder.per_question() or []


# --- timing -------------------------------------------------------------------------------------------------


def timed(fn: Callable[..., object], *args: Any, **kwargs: Any) -> float:
    """Milliseconds one call takes."""
    start = time.perf_counter()
    fn(*args, **kwargs)
    return (time.perf_counter() - start) * 1000


def percentiles(values: list[float]) -> dict[str, float]:
    p50, p95 = np.percentile(values, [50, 95])
    return {"p50_ms": round(float(p50), 3), "p95_ms": round(float(p95), 3), "n": len(values)}


# --- loopback clients ---------------------------------------------------------------------------------------


def _client_loop(url: str, key: str, asked: Sequence[str], offset: int, stop: float,
                 out: list[tuple[int, float]], lock: threading.Lock) -> None:
    """One client asking `asked` in turn from `offset` until `stop`; each reply's status and seconds go to
    `out`."""
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


def run_clients(
    url: str, key: str, asked: Sequence[str], clients: int, seconds: float
) -> list[tuple[int, float]]:
    """`clients` threads asking for `seconds`, each from its own place in `asked`: every (status, seconds)."""
    results: list[tuple[int, float]] = []
    lock = threading.Lock()
    stop = time.monotonic() + seconds
    threads = [threading.Thread(target=_client_loop, args=(url, key, asked, n * 7, stop, results, lock))
               for n in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results
