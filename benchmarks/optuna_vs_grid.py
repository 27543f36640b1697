"""Optuna's TPE against a grid on the same trial budget: the best objective found after each trial, and wall time.

    python -m benchmarks.optuna_vs_grid                       # demo-en, demo-zh, python_faq-en, debian_reference-zh
    python -m benchmarks.optuna_vs_grid --sets demo-en --trials 16

Both run the study of `python run.py -m hydra/sweeper=optuna` (experiments/tuning/optuna_study.py) over the same
retrieval space, on each set's dev part; TPE with `sampler=tpe`, the grid with `sampler=grid` (every combination,
in a seeded random order, as far as the budget reaches). A trial is the job's retrieval evaluation run in this
process on the set's cached index (no MLflow run), so the comparison is of the samplers, not of job start-up. The
objective is retrieval/mrr_at_10, the one the default sweeper maximises. Writes docs/results/<date>-optuna-vs-grid.md.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks.common import command, machine_line, report_header, write_result
from benchmarks.testset_tau import set_overrides
from experiments.evaluation.evaluate import evaluate
from experiments.evaluation.settings import EvalSettings
from experiments.runs.config import compose, validate
from experiments.runs.indexed import prepare_pipeline
from experiments.tuning.optuna_study import DEV, JobOutcome, run_study
from experiments.tuning.search_space import search_space
from pipelines.run_layout import JobFolder

# the demo, and two sets whose questions are FAQ and manual headings (ragtune doc-sets build, before)
SETS = ("demo-en", "demo-zh", "python_faq-en", "debian_reference-zh")
METRIC = "retrieval/mrr_at_10"
SPACE = {
    "pipeline": "choice(bm25, dense, hybrid)",
    "retriever.fusion.mode": "choice(dbsf, rrf, merge)",
    "retriever.candidates": "choice(10, 20, 50, 100)",
    "retriever.fusion.agreement_bonus": "choice(0.0, 0.2, 0.4, 0.8)",
    "retriever.bm25.k1": "choice(0.9, 1.2, 1.5, 2.0)",
}


@dataclass(frozen=True)
class Curve:
    sampler: str
    best_after: list[float]  # the best objective after each trial
    elapsed: list[float]  # wall seconds of the study when each trial ended


def run(set_name: str, sampler: str, trials: int, seed: int) -> Curve:
    space = search_space(SPACE, [])
    settings = EvalSettings(ks=[10], trace_sample=0)
    folder = Path(tempfile.mkdtemp(prefix=f"optuna-{sampler}-"))
    elapsed: list[float] = []

    def launch(batch: list[list[str]], first: int) -> list[JobOutcome]:
        outcomes = []
        for number, overrides in enumerate(batch, start=first):
            prepared = prepare_pipeline(validate(compose([*set_overrides(set_name), DEV, *overrides])))  # dev part only
            index = prepared.index()
            prepared.warm_up()
            result = evaluate(prepared.query, prepared.dataset.golden, settings, progress=False)
            job = JobFolder(folder / str(number))
            job.path.mkdir()
            job.write_metrics(result.metrics)
            job.write_run_info({"index_fingerprint": index.fingerprint})
            outcomes.append(JobOutcome(job.path))
            elapsed.append(time.perf_counter() - start)
        return outcomes

    start = time.perf_counter()
    study = run_study(space, [METRIC], ["maximize"], trials, launch, seed=seed, sampler=sampler, batch_size=1)
    best, curve = float("-inf"), []
    for trial in study.trials:
        best = max(best, trial.values[0] if trial.values else float("-inf"))
        curve.append(best)
    print(f"  {set_name:22} {sampler:5} best {curve[-1]:.4f} in {elapsed[-1]:.0f} s", file=sys.stderr)
    return Curve(sampler, curve, elapsed)


def timed(set_name: str, sampler: str, trials: int, seed: int) -> Curve:
    """The study run twice with the same seed (the same trials), the second timed: every index it needs is built
    and the models are loaded, so neither sampler pays for what the other, run first, left in the caches."""
    run(set_name, sampler, trials, seed)
    return run(set_name, sampler, trials, seed)


def trials_to_reach(curve: Curve, target: float) -> int | None:
    return next((i + 1 for i, value in enumerate(curve.best_after) if value >= target - 1e-12), None)


def seconds_to_reach(curve: Curve, target: float) -> str:
    trials = trials_to_reach(curve, target)
    return "not reached" if trials is None else f"{curve.elapsed[trials - 1]:.0f}"


def report(results: dict[str, tuple[Curve, Curve]], command_line: str, trials: int) -> str:
    lines = [
        report_header(command_line),
        "",
        "# Optuna (TPE) against a grid on the same trial budget",
        "",
        f"{machine_line()} Budget: "
        f"{trials} trials per sampler and set, on the set's dev part (`dataset.holdout.use=dev`). Space: "
        + ", ".join(f"`{k}` {v}" for k, v in SPACE.items())
        + f" ({_grid_size()} combinations). Objective: {METRIC} (maximised). The grid takes the combinations in a "
        "seeded random order. Seconds are wall time in one process, of the second of two runs of each study with the "
        "same seed (its indexes built and models loaded): until it first reached the grid's best (the grid: its own "
        "best), and of the whole study.",
        "",
        "| set | TPE best | grid best | TPE trials to the grid's best | TPE seconds to it | grid seconds to it "
        "| TPE seconds, all | grid seconds, all |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, (tpe, grid) in results.items():
        target = grid.best_after[-1]
        reach = trials_to_reach(tpe, target)
        lines.append(f"| {name} | {tpe.best_after[-1]:.4f} | {target:.4f} | "
                     f"{reach if reach is not None else 'not reached'} | {seconds_to_reach(tpe, target)} | "
                     f"{seconds_to_reach(grid, target)} | {tpe.elapsed[-1]:.0f} | {grid.elapsed[-1]:.0f} |")
    lines += ["", "Best objective after each trial (TPE / grid):", "",
              "| trial | " + " | ".join(results) + " |", "|---" * (len(results) + 1) + "|"]
    for i in range(trials):
        cells = [f"{tpe.best_after[i]:.4f} / {grid.best_after[i]:.4f}" for tpe, grid in results.values()]
        lines.append(f"| {i + 1} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _grid_size() -> int:
    size = 1
    for distribution in search_space(SPACE, []).distributions.values():
        size *= len(distribution.choices)  # type: ignore[attr-defined]
    return size


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", nargs="*", default=[*SETS])
    parser.add_argument("--trials", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    results = {name: (timed(name, "tpe", args.trials, args.seed), timed(name, "grid", args.trials, args.seed))
               for name in args.sets}
    text = report(results, command("benchmarks.optuna_vs_grid", argv), args.trials)
    print(text)
    write_result(text, None, "optuna-vs-grid", sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
