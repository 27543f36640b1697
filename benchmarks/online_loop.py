"""The online loop end to end, as a user runs it (issue 38): offline runs -> promotion -> A/B serving -> ratings ->
online report -> harvest -> the harvested questions as a regression test.

    python -m benchmarks.online_loop [--work DIR] [--questions 320] [--users 40] [--results FILE] [--costs]

1. `run.py` twice on the demo, differing in one slot (answer=span, answer=extractive); both promoted to one
   registered model, as aliases champion and challenger.
2. `ragtune serve model=models:/handbook serve.variants.champion=0.5 serve.variants.challenger=0.5`, a real server
   on loopback. A scripted population of users (one API key each) asks questions drawn from the demo golden set;
   each user rates each answer by its token F1 against the reference answer (a deterministic oracle): up at
   F1 >= 0.5, else down with the reference as `correct_answer`.
3. `ragtune online-report --json` must name the better variant at p < 0.05, in the direction of the offline paired
   comparison of the two runs' answer/f1.
4. `ragtune harvest` writes candidates; `run.py dataset.golden=[CANDIDATES] dataset.include_candidates=true` runs
   both configurations on them; `ragtune gate --baseline BETTER --candidate WORSE` must fail (exit 1).
With --costs, also: the champion's latency at 8 clients with and without serve.shadow=challenger, and a load during
which the tracking server is stopped (failed replies, dropped traces). Prints one JSON summary; exit 1 when a step
of the loop does not hold. --results writes the Markdown report (docs/results/).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import mlflow
import numpy as np
import yaml

from benchmarks.common import ROOT, machine, machine_line, report_header, run_clients
from experiments.comparison.paired_compare import compare_records, load_per_question
from experiments.evaluation.answer_metrics import token_f1
from serving.loopback import free_port, wait_until_up

MODEL = "handbook"
SLOTS = {"champion": "answer=span", "challenger": "answer=extractive"}
GOLDEN = ROOT / "data" / "demo" / "golden.jsonl"
SATISFIED_F1 = 0.5
RAGTUNE = [sys.executable, "-m", "serving.cli"]


class Loop:
    """One work folder: its MLflow store, index cache and files, and the commands run against them."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.tracking = f"sqlite:///{work / 'mlflow.db'}"
        self.env = os.environ | {"MLFLOW_TRACKING_URI": self.tracking, "PYTHONPATH": str(ROOT)}
        self.log = (work / "commands.log").open("a", encoding="utf-8")

    def command(self, args: Sequence[str], check: bool = True) -> subprocess.CompletedProcess:
        started = time.perf_counter()
        done = subprocess.run(list(args), cwd=self.work, env=self.env, capture_output=True, text=True, timeout=1800)
        self.log.write(f"$ {' '.join(args)}  # exit {done.returncode}, {time.perf_counter() - started:.0f} s\n"
                       f"{done.stdout[-4000:]}\n{done.stderr[-4000:]}\n")
        self.log.flush()
        if check and done.returncode != 0:
            raise RuntimeError(f"{' '.join(args[:4])}... exited {done.returncode}: {done.stderr[-2000:]}")
        return done

    def run_py(self, *overrides: str) -> str:
        """A run.py job in this store; its run id."""
        before = {r.info.run_id for r in self.runs()}
        self.command([sys.executable, str(ROOT / "run.py"), f"paths.cache={self.work / 'cache'}",
                      f"mlflow.tracking_uri={self.tracking}", f"mlflow.artifact_root={self.work / 'artifacts'}",
                      *overrides])
        new = [r for r in self.runs() if r.info.run_id not in before and r.data.tags.get("mlflow.parentRunId") is None]
        assert len(new) == 1, f"run.py {overrides} logged {len(new)} top-level runs"
        return new[0].info.run_id

    def runs(self) -> list[Any]:
        mlflow.set_tracking_uri(self.tracking)
        return mlflow.MlflowClient().search_runs(
            [e.experiment_id for e in mlflow.MlflowClient().search_experiments()], max_results=1000)

    @contextlib.contextmanager
    def serving(self, *overrides: str, tracking: str | None = None) -> Iterator[str]:
        """`ragtune serve` on a free loopback port until the block ends; its base URL once /readyz says ready."""
        port = free_port()
        log = self.work / f"serve-{port}.log"
        env = self.env | ({"MLFLOW_TRACKING_URI": tracking} if tracking else {})
        server = subprocess.Popen(
            [*RAGTUNE, "serve", f"model=models:/{MODEL}", f"serve.port={port}",
             f"serve.api_keys_file={self.work / 'keys.yaml'}", f"mlflow.tracking_uri={tracking or self.tracking}",
             *overrides], cwd=self.work, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}"
        try:
            wait_until_up(f"{url}/readyz", server, log, seconds=900)
            yield url
        finally:
            server.terminate()
            server.wait(timeout=60)


def golden_items() -> list[dict[str, Any]]:
    """Answerable single questions with a reference answer: what the oracle can rate."""
    rows = [json.loads(line) for line in GOLDEN.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [r for r in rows if r.get("reference_answer") and not r.get("history") and r.get("answerable", True)]


def write_keys(path: Path, users: int) -> dict[str, str]:
    """One API key per user, all of tenant `demo`: user name -> key."""
    keys = {f"u{i:02d}": f"k-loop-u{i:02d}" for i in range(users)}
    path.write_text(yaml.safe_dump({key: {"tenant": "demo", "groups": [], "user": user} for user, key in keys.items()}))
    return keys


def ask_and_rate(url: str, keys: dict[str, str], questions: int, seed: int = 7) -> dict[str, Any]:
    """Each user asks its share of questions drawn from the golden set and rates each answer by its F1."""
    items, rng = golden_items(), random.Random(seed)
    per_user = -(-questions // len(keys))
    plan = [(key, rng.choice(items)) for key in keys.values() for _ in range(per_user)]
    outcomes: list[dict[str, Any]] = []
    lock = threading.Lock()

    def one(key: str, item: dict[str, Any]) -> None:
        headers = {"Authorization": f"Bearer {key}"}
        with httpx.Client(timeout=300, headers=headers) as http:
            reply = http.post(f"{url}/query", json={"question": item["question"]})
            if reply.status_code != 200:
                with lock:
                    outcomes.append({"status": reply.status_code})
                return
            body = reply.json()
            f1 = token_f1(body.get("answer") or "", item["reference_answer"])
            up = f1 >= SATISFIED_F1
            rating = {"trace_id": body["trace_id"], "rating": 1 if up else -1, "comment": f"oracle F1 {f1:.2f}"}
            if not up:
                rating["correct_answer"] = item["reference_answer"]
            rated = http.post(f"{url}/feedback", json=rating).status_code
            with lock:
                outcomes.append({"status": 200, "variant": body["variant"], "f1": f1, "up": up, "rated": rated})

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda job: one(*job), plan))
    ok = [o for o in outcomes if o["status"] == 200]
    return {
        "asked": len(outcomes), "failed": len(outcomes) - len(ok),
        "ratings_accepted": sum(o["rated"] == 202 for o in ok),
        "by_variant": {v: {"asked": sum(o["variant"] == v for o in ok),
                           "mean_f1": round(float(np.mean([o["f1"] for o in ok if o["variant"] == v])), 3),
                           "up": sum(o["up"] for o in ok if o["variant"] == v)}
                       for v in sorted({o["variant"] for o in ok})},
    }


def drained(url: str, seconds: float = 300) -> dict[str, int]:
    """Waits until the server's trace queue is empty; its trace counts."""
    deadline = time.monotonic() + seconds
    while True:
        counts = httpx.get(f"{url}/healthz").json()["traces"]
        if counts["queued"] == 0 or time.monotonic() > deadline:
            return counts
        time.sleep(0.5)


def offline(loop: Loop, runs: dict[str, str]) -> dict[str, Any]:
    """The two runs' paired answer/f1 (challenger minus champion)."""
    client = mlflow.MlflowClient()
    [pair] = compare_records(load_per_question(client, runs["champion"]),
                             load_per_question(client, runs["challenger"]), ["answer/f1"])
    return {"metric": "answer/f1", "champion": pair.baseline, "challenger": pair.candidate,
            "difference": pair.diff, "ci": [pair.low, pair.high], "p_value": pair.p_value, "n": pair.n}


def load(url: str, key: str, clients: int, seconds: float) -> dict[str, Any]:
    """bench_serve's clients against `url`: requests, failures and latency percentiles."""
    results = run_clients(url, key, [item["question"] for item in golden_items()], clients, seconds)
    ok = [s for status, s in results if status == 200]
    return {"requests": len(results), "failed": len(results) - len(ok),
            "errors": dict(Counter(str(status) for status, _ in results if status != 200)),
            "p50_s": round(float(np.percentile(ok, 50)), 3), "p95_s": round(float(np.percentile(ok, 95)), 3)}


def costs(loop: Loop, key: str, clients: int, seconds: float) -> dict[str, Any]:
    """Shadow on vs off at `clients` clients (the champion alone serves), then a load whose tracking server dies."""
    out: dict[str, Any] = {}
    for name, overrides in (("shadow_off", []), ("shadow_on", ["serve.shadow=challenger"])):
        with loop.serving("serve.variants.champion=1", *overrides) as url:
            out[name] = load(url, key, clients, seconds)
            out[name]["shadow_shed"] = httpx.get(f"{url}/healthz").json().get("shadow_shed")
    out["shadow_p95_ratio"] = round(out["shadow_on"]["p95_s"] / out["shadow_off"]["p95_s"], 2)
    port = free_port()
    log = loop.work / "mlflow-server.log"
    store = subprocess.Popen(
        [str(Path(sys.executable).with_name("mlflow")), "server", "--host", "127.0.0.1", "--port", str(port),
         "--backend-store-uri", loop.tracking, "--default-artifact-root", (loop.work / "artifacts").as_uri(),
         "--workers", "1"], cwd=loop.work, stdout=log.open("w"), stderr=subprocess.STDOUT)
    try:
        wait_until_up(f"http://127.0.0.1:{port}/health", store, log, seconds=120)
        with loop.serving("serve.variants.champion=1", tracking=f"http://127.0.0.1:{port}") as url:
            stopper = threading.Timer(seconds / 3, store.terminate)
            stopper.start()
            result = load(url, key, clients, seconds)
            stopper.join()
            result["traces"] = httpx.get(f"{url}/healthz").json()["traces"]
            out["store_stopped"] = result
    finally:
        store.terminate()
        store.wait(timeout=60)
    return out


def markdown(summary: dict[str, Any]) -> str:
    """The report docs/results keeps: what ran, each step's figures, and whether each check held."""
    off, rep, online = summary["offline"], summary["report"], summary["online"]
    c = rep["comparison"]

    def num(x: float | None, digits: int = 3) -> str:
        return "n/a" if x is None else f"{x:.{digits}f}"

    lines = [
        report_header("python -m benchmarks.online_loop --costs --results docs/results/2026-12-06-online-loop.md",
                      "[serving](../serving.md)"), "",
        "# The online loop, end to end", "",
        f"Date: {time.strftime('%Y-%m-%d')}. {machine_line()} "
        f"Wall time {summary['wall_s']} s.", "",
        f"Two demo runs differing in one slot ({', '.join(f'{a}: `{s}`' for a, s in summary['slots'].items())}) "
        f"were promoted as aliases of one model and served 50/50 by `ragtune serve` (sticky per user). "
        f"{summary['users']} scripted users asked {online['asked']} questions drawn from data/demo/golden.jsonl and "
        f"rated each answer by its token F1 against the reference (up at F1 >= {SATISFIED_F1}).", "",
        "| step | figure |", "|---|---|",
        f"| offline, paired answer/f1 over {off['n']} questions | champion {num(off['champion'])}, challenger "
        f"{num(off['challenger'])}; difference {num(off['difference'])} [{num(off['ci'][0])}, {num(off['ci'][1])}], "
        f"p={num(off['p_value'])} |",
        f"| served | {online['asked']} asked, {online['failed']} failed, {online['ratings_accepted']} ratings "
        f"accepted; " + "; ".join(f"{v}: {x['asked']} asked, mean F1 {x['mean_f1']}, {x['up']} up"
                                  for v, x in online["by_variant"].items()) + " |",
        f"| traces | {online['traces']} |",
        "| online report | " + "; ".join(f"{v} satisfaction {num(s['rate'])} [{num(s['low'])}, {num(s['high'])}]"
                                       for v, s in rep["satisfaction"].items())
        + f"; challenger minus champion {num(c['difference'])} [{num(c['ci'][0])}, {num(c['ci'][1])}], "
        f"p={num(c['p_value'], 4)} ({c['test']}, n={c['n']}); exit {rep['exit']} |",
        f"| harvest | {summary['harvest']['line']} ({summary['harvest']['with_reference']} with a reference answer) |",
        f"| gate on the candidates | baseline {summary['gate']['baseline']}, candidate {summary['gate']['candidate']}: "
        f"exit {summary['gate']['exit']}; " + "; ".join(f"`{line}`" for line in summary["gate"]["lines"]) + " |",
        "", "Checks: " + ", ".join(f"{name} {'held' if ok else '**failed**'}"
                                   for name, ok in summary["checks"].items()) + ".", "",
    ]
    if "costs" in summary:
        k = summary["costs"]
        lines += [
            "## Costs", "",
            "The champion alone (serve.variants.champion=1), 8 clients for 60 s each, asking golden questions:", "",
            "| | requests | failed | p50 s | p95 s | shadow shed |", "|---|---|---|---|---|---|",
            *[f"| {name} | {r['requests']} | {r['failed']} | {r['p50_s']} | {r['p95_s']} | {r.get('shadow_shed')} |"
              for name, r in (("shadow off", k["shadow_off"]), ("shadow on (challenger)", k["shadow_on"]))],
            "", f"Shadow p95 / no-shadow p95: **{k['shadow_p95_ratio']}** (target at most 1.2); p50 "
            f"{k['shadow_on']['p50_s'] / k['shadow_off']['p50_s']:.2f}x, requests served "
            f"{k['shadow_on']['requests'] / k['shadow_off']['requests']:.2f}x. One 60 s load each on a 2-core VM: "
            "p95 moves by tens of percent between identical runs.", "",
            f"Tracking server (`mlflow server`) stopped a third into a load: {k['store_stopped']['requests']} "
            f"requests, {k['store_stopped']['failed']} failed replies; traces {k['store_stopped']['traces']}.", "",
        ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, help="an empty folder for the store, cache and files (default: new)")
    parser.add_argument("--questions", type=int, default=320)
    parser.add_argument("--users", type=int, default=40)
    parser.add_argument("--costs", action="store_true", help="also measure shadow cost and a stopped tracking store")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--results", type=Path, help="write the Markdown report here")
    args = parser.parse_args(argv)
    work = args.work or Path(f"outputs/online-loop/{time.strftime('%Y%m%d-%H%M%S')}")
    work.mkdir(parents=True, exist_ok=True)
    work = work.resolve()
    loop, started = Loop(work), time.perf_counter()
    keys = write_keys(work / "keys.yaml", args.users)
    summary: dict[str, Any] = {"machine": machine(),
                               "slots": SLOTS, "questions": args.questions, "users": args.users}
    runs = {alias: loop.run_py(slot) for alias, slot in SLOTS.items()}
    for alias, run_id in runs.items():
        loop.command([*RAGTUNE, "promote", run_id, "--name", MODEL, "--alias", alias, "--tracking-uri", loop.tracking])
    summary["offline"] = offline(loop, runs)
    with loop.serving("serve.variants.champion=0.5", "serve.variants.challenger=0.5", "serve.trace.content=full") as url:
        summary["online"] = ask_and_rate(url, keys, args.questions)
        summary["online"]["traces"] = drained(url)
    report = loop.command([*RAGTUNE, "online-report", MODEL, "--json", "--out", str(work / "report"),
                           "--tracking-uri", loop.tracking], check=False)
    found = json.loads(report.stdout.splitlines()[-1])
    comparison = found["comparisons"]["challenger"]
    summary["report"] = {"exit": report.returncode, "champion": found["champion"],
                         "satisfaction": {v: found["variants"][v]["satisfaction"] for v in found["variants"]},
                         "comparison": {k: comparison[k] for k in ("test", "n", "difference", "ci", "p_value")}}
    offline_better = "challenger" if summary["offline"]["difference"] > 0 else "champion"
    online_better = "challenger" if (comparison["difference"] or 0) > 0 else "champion"
    candidates = work / "candidates.jsonl"
    harvest = loop.command([*RAGTUNE, "harvest", MODEL, "--out", str(candidates), "--tracking-uri", loop.tracking])
    lines = [json.loads(line) for line in candidates.read_text(encoding="utf-8").splitlines() if line.strip()]
    summary["harvest"] = {"line": harvest.stdout.strip().splitlines()[-1], "candidates": len(lines),
                          "with_reference": sum(bool(item.get("reference_answer")) for item in lines)}
    on_candidates = {alias: loop.run_py(slot, f"dataset.golden=[{candidates}]", "dataset.include_candidates=true")
                     for alias, slot in SLOTS.items()}
    worse = "champion" if offline_better == "challenger" else "challenger"
    gate = loop.command([*RAGTUNE, "gate", "--baseline", on_candidates[offline_better], "--candidate",
                         on_candidates[worse], "--tracking-uri", loop.tracking], check=False)
    verdict = [line for line in (gate.stdout + gate.stderr).splitlines() if line.startswith(("gate:", "FAIL"))]
    summary["gate"] = {"baseline": offline_better, "candidate": worse, "exit": gate.returncode, "lines": verdict}
    summary["checks"] = {
        "at_least_300_questions": summary["online"]["asked"] >= 300 and summary["online"]["failed"] == 0,
        "report_significant": comparison["p_value"] is not None and comparison["p_value"] < 0.05,
        "same_direction_as_offline": online_better == offline_better,
        "candidates_load": len(lines) > 0,
        "gate_fails_the_worse": gate.returncode == 1,
    }
    if args.costs:
        summary["costs"] = spent = costs(loop, next(iter(keys.values())), args.clients, args.seconds)
        stopped = spent["store_stopped"]
        summary["checks"] |= {"shadow_p95_at_most_1.2x": spent["shadow_p95_ratio"] <= 1.2,
                              "store_stopped_no_failed_reply": stopped["failed"] == 0,
                              "store_stopped_drops_counted": stopped["traces"]["dropped"] > 0}
    summary["wall_s"] = round(time.perf_counter() - started)
    print(json.dumps(summary, ensure_ascii=False))
    if args.results:
        args.results.write_text(markdown(summary), encoding="utf-8")
    return 0 if all(summary["checks"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
