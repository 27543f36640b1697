"""Quality gate for CI: fail when a candidate run regresses any layer's headline metric beyond a threshold.

    ragtune gate --baseline RUN --candidate RUN --max-regression 0.05

Each layer (retrieval, context, answer) is gated on the headline metrics both runs logged; a layer only one run
has (a retrieval-only run against a generating one) is skipped and named.
Exit 0: no headline metric regressed by more than the threshold. Exit 1: at least one did (each is named).
Exit 2: the gate could not judge (an unknown run, runs that answered different data sets, or no headline
metric both runs logged). Only runs of the same data set (corpus, golden set and its part: the
`ragtune.dataset_fingerprint` tag run.py sets) are gated: means over other questions say nothing about a
regression, so there is no override (`ragtune compare` shows such runs side by side).
A regression is an absolute drop for higher-is-better metrics and a rise for lower-is-better ones. Where both
runs logged per-question scores, the paired 95 % CI and p-value are printed beside each verdict.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from mlflow.entities import Run
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from experiments.comparison.paired_compare import compare_records, load_per_question
from experiments.comparison.significance import PairedComparison
from experiments.datasets.holdout import USE_KEY as HOLDOUT_PARAM
from experiments.runs.metric_catalog import lower_is_better
from experiments.runs.tracking import TRACKING_HELP, connect
from pipelines.errors import UserError
from pipelines.run_layout import DATASET_FINGERPRINT_TAG, DATASET_TAG

# One or two per layer: what a team watches before it ships a change.
HEADLINE = {
    "retrieval": ["retrieval/recall_at_10"],
    "context": ["context/recall_at_10"],
    "answer": ["answer/f1", "answer/refusal_accuracy", "answer/false_refusal_rate"],
}
EXIT_OK, EXIT_REGRESSED, EXIT_UNJUDGEABLE = 0, 1, 2


def regression_limit(text: str) -> float:
    """argparse type of `--max-regression` (gate and promote): a finite number >= 0, since NaN would pass
    every regression and inf any."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, not {text!r}")
    return value


@dataclass(frozen=True)
class Verdict:
    layer: str
    metric: str
    baseline: float
    candidate: float
    regression: float
    failed: bool
    paired: PairedComparison | None = None


def judge_runs(
    baseline: Mapping[str, float],
    candidate: Mapping[str, float],
    max_regression: float,
    headline: Mapping[str, Sequence[str]] = HEADLINE,
) -> tuple[list[Verdict], list[str]]:
    """Verdicts for the headline metrics both runs logged, and a note per metric skipped because one run lacks it."""
    verdicts, skipped = [], []
    for layer, metrics in headline.items():
        for metric in metrics:
            missing = [side for side, run in (("baseline", baseline), ("candidate", candidate)) if metric not in run]
            if missing:
                skipped.append(f"{metric} ({layer}): not logged by the {' and the '.join(missing)}")
                continue
            change = candidate[metric] - baseline[metric]
            regression = change if lower_is_better(metric) else -change
            verdicts.append(
                Verdict(layer, metric, baseline[metric], candidate[metric], regression, regression > max_regression)
            )
    return verdicts, skipped


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", required=True, help="MLflow run id of the accepted configuration")
    parser.add_argument("--candidate", required=True, help="MLflow run id of the change under test")
    parser.add_argument("--max-regression", type=regression_limit, default=0.05,
                        help="largest tolerated absolute regression (a finite number >= 0)")
    parser.add_argument("--tracking-uri", help=TRACKING_HELP)
    args = parser.parse_args(argv)
    try:
        connect(args.tracking_uri, key="--tracking-uri")
        client = MlflowClient()
        baseline, candidate = client.get_run(args.baseline), client.get_run(args.candidate)
    except (MlflowException, UserError) as e:
        print(f"gate: cannot read runs: {e}", file=sys.stderr)
        return EXIT_UNJUDGEABLE
    result = gate_runs(client, baseline, candidate, args.max_regression)
    if result.lines():
        print("\n".join(result.lines()))
    print(f"gate: {result.summary()}", file=sys.stderr if result.exit_code != EXIT_OK else sys.stdout)
    return result.exit_code


@dataclass(frozen=True)
class GateResult:
    verdicts: list[Verdict]
    skipped: list[str]
    max_regression: float
    other_data: str | None = None  # why the runs cannot be gated: they answered different data sets

    @property
    def failed(self) -> list[Verdict]:
        return [v for v in self.verdicts if v.failed]

    @property
    def exit_code(self) -> int:
        return EXIT_UNJUDGEABLE if not self.verdicts else EXIT_REGRESSED if self.failed else EXIT_OK

    def summary(self) -> str:
        if self.other_data is not None:
            return f"cannot judge: {self.other_data}"
        if not self.verdicts:
            return "cannot judge: the runs share no headline metric"
        if self.failed:
            names = ", ".join(f"{v.metric} ({v.layer})" for v in self.failed)
            return f"FAILED, regressed beyond {self.max_regression}: {names}"
        return f"passed ({len(self.verdicts)} headline metrics within {self.max_regression})"

    def lines(self) -> list[str]:
        if self.other_data is not None:
            return []
        return verdict_lines(self.verdicts, self.skipped, self.max_regression)


def data_set(run: Run) -> str:
    """The run's data set as its tags name it, with the holdout part it answered: `name[, dev part] (fingerprint …)`."""
    fingerprint = run.data.tags.get(DATASET_FINGERPRINT_TAG)
    part = run.data.params.get(HOLDOUT_PARAM, "all")
    return (f"{run.data.tags.get(DATASET_TAG, 'an unnamed data set')}{'' if part == 'all' else f', {part} part'} "
            f"({f'fingerprint {fingerprint[:12]}' if fingerprint else 'no fingerprint recorded'})")


def data_set_mismatch(baseline: Run, candidate: Run) -> str | None:
    """Why the runs may not be gated against each other (their data set fingerprints differ, or only one run
    records one); None when they answered the same data set, or when neither records it (runs logged by
    hand)."""
    fingerprints = {run.data.tags.get(DATASET_FINGERPRINT_TAG) for run in (baseline, candidate)}
    if len(fingerprints) == 1:
        return None
    return (f"the runs answered different data sets: baseline {baseline.info.run_id} on "
            f"{data_set(baseline)}, candidate {candidate.info.run_id} on {data_set(candidate)}")


def gate_runs(client: MlflowClient, baseline: Run, candidate: Run, max_regression: float) -> GateResult:
    """The candidate run judged against the baseline run, with paired CIs where both logged per-question
    scores; no verdict at all when the runs answered different data sets."""
    mismatch = data_set_mismatch(baseline, candidate)
    if mismatch is not None:
        return GateResult([], [], max_regression, mismatch)
    verdicts, skipped = judge_runs(baseline.data.metrics, candidate.data.metrics, max_regression)
    verdicts = with_paired(client, baseline.info.run_id, candidate.info.run_id, verdicts)
    return GateResult(verdicts, skipped, max_regression)


def verdict_lines(verdicts: Sequence[Verdict], skipped: Sequence[str], max_regression: float) -> list[str]:
    """One line per verdict with its paired CI, one per skipped metric, and the layers nobody could judge."""
    lines = []
    for v in verdicts:
        status = "FAIL" if v.failed else "ok"
        detail = ""
        if v.paired is not None:
            detail = (f"  diff 95% CI [{v.paired.low:+.3f}, {v.paired.high:+.3f}], p={v.paired.p_value:.3f}, "
                      f"n={v.paired.n}")
        direction = "lower is better" if lower_is_better(v.metric) else "higher is better"
        lines.append(
            f"{status:4} {v.layer:9} {v.metric}: {v.baseline:.3f} -> {v.candidate:.3f} "
            f"(regression {v.regression + 0.0:+.3f}, limit {max_regression}; {direction}){detail}"
        )
    lines += [f"skip {note}" for note in skipped]
    gated = {v.layer for v in verdicts}
    skipped_layers = [layer for layer in HEADLINE if layer not in gated]
    if skipped_layers:
        lines.append(f"gate: layers skipped (not logged by both runs): {', '.join(skipped_layers)}")
    return lines


def with_paired(client: MlflowClient, baseline: str, candidate: str, verdicts: list[Verdict]) -> list[Verdict]:
    """Adds the paired CI and p-value where both runs have per-question scores; the verdict itself stays on means."""
    try:
        a, b = load_per_question(client, baseline), load_per_question(client, candidate)
        by_metric = {c.metric: c for c in compare_records(a, b, [v.metric for v in verdicts])}
    except (LookupError, ValueError):
        return verdicts
    return [
        Verdict(v.layer, v.metric, v.baseline, v.candidate, v.regression, v.failed, by_metric.get(v.metric))
        for v in verdicts
    ]


if __name__ == "__main__":
    sys.exit(main())
