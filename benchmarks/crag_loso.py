"""CRAG thresholds on sets they were not fitted on: leave-one-set-out over every set with unanswerable questions.

    python -m benchmarks.crag_loso                               # e5 scorer, demo and HaluEval-200 (40 withheld)
    python -m benchmarks.crag_loso --scorer-overrides crag/scorer=cross_encoder

Each set's passages are graded once (experiments.tuning.calibrate), and each set's own separation is printed first; per
fold the thresholds are fitted on the other sets pooled and applied to the left-out one, which reports the unanswerable questions it refuses, the answerable ones
it refuses, and CRAG's label accuracy. The last row fits on every set: the shipped default.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from experiments.tuning.calibrate import Graded, Scores, below, fit, grade_golden_set

SETS = {
    "demo": [],
    # 160 answerable questions, and 40 whose own passage a filter hides (experiments/datasets/halueval.py)
    "halueval_withheld": ["dataset=halueval", "dataset.unanswerable=40"],
}


def applied(graded: Sequence[Graded], lower: float) -> tuple[float, float, float]:
    """Refusal rate on the unanswerable, false refusals on the answerable, label accuracy, at `lower`."""
    scores = Scores.of(graded)
    refused, false = below(scores.unanswerable, lower), below(scores.answerable, lower)
    accuracy = (refused * len(scores.unanswerable) + (1 - false) * len(scores.answerable)) / len(graded)
    return refused, false, accuracy


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scorer-overrides", nargs="*", default=[], help="e.g. crag/scorer=cross_encoder")
    parser.add_argument("--max-false-refusals", type=float, default=0.10)
    args = parser.parse_args(argv)
    graded = {name: grade_golden_set([*overrides, *args.scorer_overrides], progress=False)[0] for name, overrides in SETS.items()}
    print(f"| set | question AUC | unanswerable refused at <= {args.max_false_refusals:.0%} false refusals | passage AUC |")
    print("|---|---|---|---|")
    for name, items in graded.items():
        own = fit(items, args.max_false_refusals)
        print(f"| {name} | {own.question_auc:.3f} | {own.refusal_rate:.0%} | {own.passage_auc:.3f} |")
    print()
    print("| left out | fitted on | lower | upper | unanswerable refused | answerable refused | label accuracy |")
    print("|---|---|---|---|---|---|---|")
    for name, held_out in graded.items():
        train = [g for other, items in graded.items() if other != name for g in items]
        result = fit(train, args.max_false_refusals)
        refused, false, accuracy = applied(held_out, result.lower)
        fitted = " + ".join(other for other in graded if other != name)
        print(f"| {name} | {fitted} | {result.lower} | {result.upper} | {refused:.0%} | {false:.0%} | {accuracy:.3f} |")
    everything = fit([g for items in graded.values() for g in items], args.max_false_refusals)
    for name, items in graded.items():
        refused, false, accuracy = applied(items, everything.lower)
        print(f"| {name} (in) | all sets | {everything.lower} | {everything.upper} | {refused:.0%} | {false:.0%} | {accuracy:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
