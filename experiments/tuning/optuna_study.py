"""An Optuna study whose trials are run.py jobs: ask a batch, launch it, tell each trial what its job logged.

Trials of a batch are ordered by the knobs that change the index, so that neighbours share one; every trial reads
the shared index cache, so a trial that changes only query-side knobs indexes nothing, and the time that saves is
reported. A job that fails is told to Optuna as a failed trial, and the study goes on. With `holdout`, trials run on
the golden set's dev part only (dataset.holdout.use=dev); the Pareto configurations and the default are then run on
the test part, each with its confidence interval and its paired difference from the default. The study owns
dataset.holdout.use: a user's value would turn the test re-check into a rerun of the tuning questions. An interrupted
study (SIGINT, SIGTERM) stops with the trials that finished, which are still reported.
"""

from __future__ import annotations

import itertools
import math
import random
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import optuna
from optuna.distributions import CategoricalDistribution
from optuna.trial import TrialState

from experiments.comparison.significance import Interval, PairedComparison, ci_note, mean_ci, paired
from experiments.datasets.holdout import USE_KEY as HOLDOUT_KEY
from experiments.evaluation.question_record import QuestionRecord
from experiments.runs.interrupts import Interrupted
from experiments.tuning.search_space import SearchSpace
from pipelines.errors import ConfigError
from pipelines.run_layout import FAILURES_FILE, JobFolder

SAMPLERS = ("tpe", "nsga2", "random", "grid")
DIRECTIONS = ("maximize", "minimize")
DEV, TEST = f"{HOLDOUT_KEY}=dev", f"{HOLDOUT_KEY}=test"


@dataclass(frozen=True)
class JobOutcome:
    """What a launched job left: its folder (metrics.json, run.json, per_question.jsonl), or why there is none."""

    job_dir: Path | None
    error: str | None = None


Launch = Callable[[list[list[str]], int], Sequence[JobOutcome]]  # (overrides per job, first job number) -> outcomes


@dataclass(frozen=True)
class TrialResult:
    number: int
    params: dict[str, Any]
    overrides: list[str]
    values: tuple[float, ...] | None  # one per objective; None: the trial failed
    job_dir: Path | None
    metrics: dict[str, float] = field(default_factory=dict)
    index_fingerprint: str | None = None
    error: str | None = None

    @property
    def failed(self) -> bool:
        return self.values is None

    @property
    def index_seconds(self) -> float:
        return self.metrics.get("time/index_seconds", 0.0)

    @property
    def cache_hit(self) -> bool:
        return bool(self.metrics.get("index/cache_hit", 0.0))


@dataclass(frozen=True)
class TestCheck:
    """A Pareto configuration (or the default) re-run on the test part."""

    label: str
    overrides: list[str]
    dev_value: float | None
    test: Interval | None
    versus_default: PairedComparison | None
    error: str | None = None
    run_id: str | None = None  # the test run's MLflow run

    @property
    def drop_beyond_ci(self) -> bool:
        """The dev-to-test drop is larger than the test interval's half width: the search fit the dev questions."""
        if self.dev_value is None or self.test is None:
            return False
        return self.dev_value - self.test.mean > (self.test.high - self.test.low) / 2

    @property
    def ci_note(self) -> str | None:
        """Why the test interval means nothing (too few test questions), or None."""
        return ci_note(self.test.n) if self.test is not None else None


@dataclass
class StudyResult:
    objectives: list[str]
    directions: list[str]
    trials: list[TrialResult]
    pareto: list[TrialResult]
    test_checks: list[TestCheck] = field(default_factory=list)

    @property
    def index_seconds_saved(self) -> float:
        """For each trial that found its index cached by an earlier trial of this study: that trial's build time
        less its own load time. Indexes built before the study are not counted."""
        built: dict[str, float] = {}
        saved = 0.0
        for trial in self.trials:
            fingerprint = trial.index_fingerprint
            if fingerprint is None:
                continue
            if not trial.cache_hit:
                built.setdefault(fingerprint, trial.index_seconds)
            elif fingerprint in built:
                saved += max(0.0, built[fingerprint] - trial.index_seconds)
        return saved


class StudyInterrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM stopped the study: `result` holds the trials that finished, `exit_code` is 130 or 143."""

    def __init__(self, result: StudyResult, exit_code: int) -> None:
        super().__init__(f"the study was interrupted after {len(result.trials)} trials")
        self.result, self.exit_code = result, exit_code


def run_study(
    space: SearchSpace,
    objectives: Sequence[str],
    directions: Sequence[str],
    n_trials: int,
    launch: Launch,
    seed: int = 0,
    sampler: str = "tpe",
    batch_size: int = 1,
    holdout: bool = False,
) -> StudyResult:
    """Runs the study; with `holdout`, the trials see the dev part and the Pareto front is checked on test.

    SIGINT or SIGTERM, in a trial (run.py exits 130/143 there) or between trials, raises StudyInterrupted."""
    check_budget(n_trials, batch_size)
    check_objectives(objectives, directions)
    check_holdout_free(space)
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # each job prints what its trial did
    study = optuna.create_study(directions=list(directions), sampler=make_sampler(sampler, seed, n_trials))
    if sampler == "grid":
        points = grid_points(space, seed)
        n_trials = min(n_trials, len(points))
        for point in points[:n_trials]:
            study.enqueue_trial(point)
    base = [DEV] if holdout else []
    trials: list[TrialResult] = []
    try:
        while len(trials) < n_trials:
            asked = [study.ask(space.distributions) for _ in range(min(batch_size, n_trials - len(trials)))]
            asked.sort(key=lambda trial: space.index_params(trial.params))  # neighbours share an index
            batch = [base + space.overrides(trial.params) for trial in asked]
            for trial, overrides, outcome in zip(asked, batch, launch(batch, len(trials)), strict=True):
                result = read_trial(trial.number, trial.params, overrides, outcome, objectives)
                if result.failed:
                    study.tell(trial, state=TrialState.FAIL)
                else:
                    study.tell(trial, list(result.values or ()))
                trials.append(result)
        result = _result(study, trials, objectives, directions)
        if holdout and result.pareto:
            result.test_checks = check_on_test(space, result.pareto, objectives[0], launch, len(trials))
    except (KeyboardInterrupt, SystemExit) as stop:  # SystemExit: run.py's exit from an interrupted job
        raise StudyInterrupted(_result(study, trials, objectives, directions), _exit_code(stop)) from stop
    return result


def _result(
    study: optuna.Study, trials: list[TrialResult], objectives: Sequence[str], directions: Sequence[str]
) -> StudyResult:
    """The trials so far and their Pareto front, best first."""
    done = {t.number for t in study.best_trials} if any(not t.failed for t in trials) else set()
    pareto = sorted((t for t in trials if t.number in done), key=lambda t: _order(t, directions))
    return StudyResult(list(objectives), list(directions), list(trials), pareto)


def _exit_code(stop: KeyboardInterrupt | SystemExit) -> int:
    """130 for SIGINT, 143 for SIGTERM (128 + the signal), or the code an interrupted job exited with."""
    if isinstance(stop, SystemExit):
        return stop.code if isinstance(stop.code, int) else 130
    return 128 + (stop.signum if isinstance(stop, Interrupted) else 2)


def check_budget(n_trials: int, batch_size: int) -> None:
    """Refused before any work: no trial would run (the parent would end FAILED), or a batch of none loops forever."""
    for key, value in (("n_trials", n_trials), ("batch_size", batch_size)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"config key 'hydra.sweeper.{key}': must be a whole number of at least 1, got {value!r}")


def check_holdout_free(space: SearchSpace) -> None:
    """The study sets dataset.holdout.use itself (dev for the trials, test for the re-check); a user's value,
    applied after the study's, would make the test re-check rerun the tuning questions."""
    if any(key.lstrip("+~") == HOLDOUT_KEY for key in [*space.fixed, *space.distributions]):
        raise ConfigError(f"config key '{HOLDOUT_KEY}': an Optuna study sets it itself (hydra.sweeper.holdout=true: "
                          "dev for the trials, test for the re-check); drop it from the command line and the space, "
                          "or set hydra.sweeper.holdout=false to search on every question")


def check_objectives(objectives: Sequence[str], directions: Sequence[str]) -> None:
    if not objectives or len(objectives) != len(directions):
        raise ConfigError("config key 'hydra.sweeper.objectives': give one direction per objective "
                          f"(hydra.sweeper.directions), got {list(objectives)} and {list(directions)}")
    wrong = [d for d in directions if d not in DIRECTIONS]
    if wrong:
        raise ConfigError(f"config key 'hydra.sweeper.directions': {wrong[0]!r} is not one of {list(DIRECTIONS)}")


def grid_points(space: SearchSpace, seed: int) -> list[dict[str, Any]]:
    """Every combination of the space's choices, in a seeded random order (the grid a budget cuts short fairly)."""
    loose = [k for k, d in space.distributions.items() if not isinstance(d, CategoricalDistribution)]
    if loose:
        raise ConfigError(f"config key 'hydra.sweeper.sampler': grid needs choice() entries; {loose[0]} is not one")
    keys = list(space.distributions)
    choices = [space.distributions[k].choices for k in keys]  # type: ignore[attr-defined]
    points = [dict(zip(keys, values, strict=True)) for values in itertools.product(*choices)]
    random.Random(seed).shuffle(points)
    return points


def make_sampler(name: str, seed: int, n_trials: int) -> optuna.samplers.BaseSampler:
    if name in ("tpe", "grid"):  # the grid's points are enqueued (grid_points); TPE never proposes one
        return optuna.samplers.TPESampler(seed=seed, n_startup_trials=max(2, min(10, n_trials // 3)))
    if name == "nsga2":
        return optuna.samplers.NSGAIISampler(seed=seed)
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    raise ConfigError(f"config key 'hydra.sweeper.sampler': {name!r} is not one of {list(SAMPLERS)}")


def read_trial(
    number: int, params: Mapping[str, Any], overrides: list[str], outcome: JobOutcome, objectives: Sequence[str]
) -> TrialResult:
    """A trial's values from the metrics its job wrote; a job without them, or without an objective, failed."""
    job = JobFolder(outcome.job_dir) if outcome.job_dir else None
    if job is None or not job.finished:
        error = outcome.error or f"the job logged no metrics (see {FAILURES_FILE} on the sweep's parent run)"
        return TrialResult(number, dict(params), overrides, None, outcome.job_dir, error=error)
    metrics = {k: float(v) for k, v in job.metrics().items()}
    run = job.run_info()
    missing = [name for name in objectives if not math.isfinite(metrics.get(name, math.nan))]
    values = None if missing else tuple(metrics[name] for name in objectives)
    error = f"the job logged no {missing[0]}" if missing else None
    return TrialResult(number, dict(params), overrides, values, outcome.job_dir, metrics, run.get("index_fingerprint"),
                       error)


def check_on_test(
    space: SearchSpace, pareto: Sequence[TrialResult], metric: str, launch: Launch, first_job: int
) -> list[TestCheck]:
    """The default and each Pareto configuration on the test part: the metric's CI over the test questions, and
    its paired difference from the default's."""
    configs = [("default", [TEST, *space.overrides({})], None)]
    configs += [(f"trial {t.number}", [TEST, *space.overrides(t.params)], t.metrics.get(metric)) for t in pareto]
    outcomes = launch([overrides for _, overrides, _ in configs], first_job)
    records = [_records(outcome) for outcome in outcomes]
    default = records[0]
    checks = []
    for (label, overrides, dev_value), outcome, mine in zip(configs, outcomes, records, strict=True):
        if mine is None:
            checks.append(TestCheck(label, overrides, dev_value, None, None, outcome.error or "the test run failed"))
            continue
        scores = [s for r in mine.values() if (s := r.score(metric)) is not None]
        versus = None
        if default is not None and label != "default":
            shared = [i for i in default if i in mine and default[i].score(metric) is not None
                      and mine[i].score(metric) is not None]
            versus = paired(metric, [default[i].score(metric) for i in shared],  # type: ignore[misc]
                            [mine[i].score(metric) for i in shared])  # type: ignore[misc]
        checks.append(TestCheck(label, overrides, dev_value, mean_ci(scores) if scores else None, versus,
                                run_id=job_run_id(outcome.job_dir)))
    return checks


def job_run_id(job_dir: Path | None) -> str | None:
    """The MLflow run a finished job logged into (its run.json), or None."""
    return JobFolder(job_dir).run_id if job_dir else None


def _records(outcome: JobOutcome) -> dict[str, QuestionRecord] | None:
    records = JobFolder(outcome.job_dir).per_question() if outcome.job_dir else None
    if records is None:
        return None
    return {r.id: r for r in (QuestionRecord.from_json(record) for record in records)}


def _order(trial: TrialResult, directions: Sequence[str]) -> tuple[float, ...]:
    """Best first on the first objective."""
    values = trial.values or ()
    return tuple(-v if d == "maximize" else v for v, d in zip(values, directions, strict=True))


def print_study(result: StudyResult) -> None:
    """The Pareto front and, with a holdout, how it held on test."""
    names = " | ".join(result.objectives)
    failed = sum(t.failed for t in result.trials)
    print(f"optuna: {len(result.trials)} trials ({failed} failed); Pareto front ({names}):", file=sys.stderr)
    for trial in result.pareto:
        values = ", ".join(f"{v:.4g}" for v in trial.values or ())
        params = " ".join(trial.overrides[len(trial.overrides) - len(trial.params):])
        print(f"  trial {trial.number}: {values}  {params}", file=sys.stderr)
    print(f"optuna: index seconds saved by the shared cache: {result.index_seconds_saved:.1f}", file=sys.stderr)
    for check in result.test_checks:
        if check.test is None:
            print(f"  test {check.label}: {check.error}", file=sys.stderr)
            continue
        line = f"  test {check.label}: {check.test.mean:.4f} [{check.test.low:.4f}, {check.test.high:.4f}]"
        if check.versus_default is not None:
            v = check.versus_default
            line += f", vs default {v.diff:+.4f} [{v.low:+.4f}, {v.high:+.4f}] p={v.p_value:.3f}"
        if check.ci_note:
            line += f" ({check.ci_note})"
        print(line, file=sys.stderr)
        if check.drop_beyond_ci:
            print(f"warning: {check.label} dropped from {check.dev_value:.4f} on dev to {check.test.mean:.4f} on test, "
                  "more than its CI: the search fit the dev questions", file=sys.stderr)
