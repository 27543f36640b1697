"""Fit CRAG's thresholds on your golden set, from its answerable and unanswerable questions.

    ragtune calibrate                                   # the demo, e5 scorer
    ragtune calibrate dataset=local dataset.corpus_dir=docs dataset.golden=golden.jsonl
    ragtune calibrate reranker=cross_encoder crag/scorer=reranker --max-false-refusals 0.05

Arguments are run.py overrides (pipeline=crag unless you name another pipeline with a grader). The graded
passages of every question are scored once (the thresholds do not change the scores), then:
- `lower` decides refusals: a question whose best graded passage scores below it is graded incorrect. It is the
  highest threshold at which the answerable questions below it stay within `--max-false-refusals`; the ROC of
  the best score (unanswerable against answerable) is reported with the chosen point.
- `upper` decides which passages are relevant (the correct branch answers from those alone): the threshold, at
  least `lower`, with the best Youden J (TPR - FPR) between graded passages that hold a question's evidence and
  those that do not.
Writes `<out>/<dataset>-<scorer>.yaml` (the values, their ROC points and counts) and a `.png` of both curves,
and prints the overrides to pass to run.py.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import yaml
from haystack import Document
from matplotlib.figure import Figure
from tqdm import tqdm

from components.routers.routes import CONVERSATIONAL
from experiments.datasets.golden.items import GoldenItem
from experiments.evaluation.evaluate import pipeline_inputs
from experiments.evaluation.relevance import judge
from experiments.runs.config import compose, validate
from experiments.runs.indexed import prepare_pipeline
from pipelines.errors import UserError

# Scores are all that calibration needs: everything graded incorrect and refused, so no answer is generated.
SCORE_ONLY = ["crag.upper=1e9", "crag.lower=1e9", "crag.incorrect_action=refuse"]


@dataclass(frozen=True)
class Graded:
    """One question: whether it can be answered, and each graded passage's score and whether it holds evidence."""

    answerable: bool
    scores: list[float]
    relevant: list[bool]

    @property
    def best(self) -> float:
        return max(self.scores, default=float("-inf"))


@dataclass(frozen=True)
class Calibration:
    lower: float
    upper: float
    refusal_rate: float  # unanswerable questions graded incorrect at `lower`
    false_refusal_rate: float  # answerable questions graded incorrect at `lower`
    question_auc: float
    passage_tpr: float  # relevant passages at or above `upper`
    passage_fpr: float  # passages without evidence at or above `upper`
    passage_auc: float
    answerable: int
    unanswerable: int
    relevant_passages: int
    other_passages: int


@dataclass(frozen=True)
class Scores:
    """The four score lists every ROC here is drawn from."""

    answerable: list[float]  # best graded passage per answerable question
    unanswerable: list[float]  # best graded passage per unanswerable question
    relevant: list[float]  # graded passages that hold their question's evidence
    other: list[float]  # graded passages that do not

    @classmethod
    def of(cls, graded: Sequence[Graded]) -> Scores:
        passages = [(s, r) for g in graded for s, r in zip(g.scores, g.relevant, strict=True)]
        return cls(
            answerable=[g.best for g in graded if g.answerable],
            unanswerable=[g.best for g in graded if not g.answerable],
            relevant=[s for s, r in passages if r],
            other=[s for s, r in passages if not r],
        )


class CalibrationError(UserError, ValueError):
    """A golden set that cannot calibrate (no unanswerable questions, no relevant passage)."""


def auc(positives: Sequence[float], negatives: Sequence[float]) -> float:
    """P(a positive outscores a negative), ties counting half: the area under the ROC curve."""
    pairs = [(p > n) + 0.5 * (p == n) for p in positives for n in negatives]
    return sum(pairs) / len(pairs) if pairs else float("nan")


def below(scores: Sequence[float], threshold: float) -> float:
    return sum(s < threshold for s in scores) / len(scores) if scores else 0.0


def candidates(scores: Sequence[float]) -> list[float]:
    """Every threshold that changes a decision: each score, and one above them all."""
    unique = sorted(set(scores))
    return [*unique, unique[-1] + 1e-6] if unique else []


def fit(graded: Sequence[Graded], max_false_refusals: float) -> Calibration:
    scores = Scores.of(graded)
    answerable, unanswerable, relevant, other = scores.answerable, scores.unanswerable, scores.relevant, scores.other
    if not answerable or not unanswerable:
        raise CalibrationError(
            f"calibration needs answerable and unanswerable questions (golden items with \"answerable\": false); "
            f"got {len(answerable)} answerable and {len(unanswerable)} unanswerable"
        )
    allowed = [t for t in candidates(answerable + unanswerable) if below(answerable, t) <= max_false_refusals]
    lower = max(allowed)
    if not relevant or not other:
        raise CalibrationError(
            f"calibration needs graded passages with and without evidence; got {len(relevant)} and {len(other)}"
        )
    upper = max((t for t in candidates(relevant + other) if t >= lower), key=lambda t: below(other, t) - below(relevant, t),
                default=lower)
    return Calibration(
        lower=round(lower, 4),
        upper=round(upper, 4),
        refusal_rate=below(unanswerable, lower),
        false_refusal_rate=below(answerable, lower),
        question_auc=auc(answerable, unanswerable),
        passage_tpr=1 - below(relevant, upper),
        passage_fpr=1 - below(other, upper),
        passage_auc=auc(relevant, other),
        answerable=len(answerable),
        unanswerable=len(unanswerable),
        relevant_passages=len(relevant),
        other_passages=len(other),
    )


def grade_golden_set(overrides: Sequence[str], progress: bool = True) -> tuple[list[Graded], str, str]:
    """Scores every question's graded passages; returns them with the dataset's and the scorer's names."""
    named_pipeline = any(o.startswith("pipeline=") for o in overrides)
    cfg = compose([*([] if named_pipeline else ["pipeline=crag"]), *overrides, *SCORE_ONLY])
    indexed = prepare_pipeline(validate(cfg))
    query = indexed.query
    if query.grader is None:
        raise CalibrationError(f"pipeline '{query.name}' has no grader (a CRAG evaluator named by `grader:`)")
    indexed.index()
    indexed.warm_up()
    corpus = {doc.id: doc.content or "" for doc in indexed.dataset.documents}
    graded = []
    # Greetings and vague questions (a no_retrieval or clarify route) are no retrieval to grade.
    retrieving = [item for item in indexed.dataset.golden if item.route not in CONVERSATIONAL]
    for item in tqdm(retrieving, desc="score passages", unit="q", disable=not progress):
        outputs = query.run(**pipeline_inputs(query, item))
        passages = outputs[query.grader]["graded"]
        relevant = [holds_evidence(p, item, cfg.eval.min_overlap, corpus) for p in passages]
        graded.append(Graded(bool(item.answerable), [float(p.meta["crag_score"]) for p in passages], relevant))
    return graded, str(cfg.dataset.name), str(cfg.crag.scorer.name)


def holds_evidence(passage: Document, item: GoldenItem, min_overlap: float, corpus: Mapping[str, str]) -> bool:
    """Judged alone, as evaluation judges a ranking: it covers a quote of the evidence, or is a relevant document."""
    judged = judge([passage], item, min_overlap, corpus)
    return judged is not None and any(judged.gains)


def plot(graded: Sequence[Graded], result: Calibration, title: str, path: Path) -> None:
    scores = Scores.of(graded)
    answerable, unanswerable, relevant, other = scores.answerable, scores.unanswerable, scores.relevant, scores.other
    fig = Figure(figsize=(10, 4.5))
    left, right = fig.subplots(1, 2)
    curve = [(below(answerable, t), below(unanswerable, t)) for t in candidates(answerable + unanswerable)]
    left.plot(*zip(*[(0.0, 0.0), *curve], strict=True), marker=".")
    left.plot(result.false_refusal_rate, result.refusal_rate, "o", color="C3", label=f"lower = {result.lower}")
    left.set(xlabel="answerable questions refused", ylabel="unanswerable questions refused",
             title=f"refusals (best passage score), AUC {result.question_auc:.3f}")
    curve = [(1 - below(other, t), 1 - below(relevant, t)) for t in candidates(relevant + other)]
    right.plot(*zip(*[(1.0, 1.0), *curve], strict=True), marker=".")
    right.plot(result.passage_fpr, result.passage_tpr, "o", color="C3", label=f"upper = {result.upper}")
    right.set(xlabel="passages without evidence kept", ylabel="passages with evidence kept",
              title=f"relevant passages, AUC {result.passage_auc:.3f}")
    for axis in (left, right):
        axis.plot([0, 1], [0, 1], ":", color="grey")
        axis.legend(loc="lower right")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("overrides", nargs="*", help="run.py overrides, e.g. dataset=local crag/scorer=reranker")
    parser.add_argument("--max-false-refusals", type=float, default=0.10,
                        help="share of answerable questions that `lower` may refuse (default 0.10)")
    parser.add_argument("--out", type=Path, default=Path("outputs/calibration"))
    args = parser.parse_args(argv)
    if not 0 <= args.max_false_refusals < 1:
        parser.error(f"--max-false-refusals must be in [0, 1), got {args.max_false_refusals}")
    try:
        graded, dataset, scorer = grade_golden_set(args.overrides)
        result = fit(graded, args.max_false_refusals)
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.out / f"{dataset}-{scorer}"
    overrides = f"crag.upper={result.upper} crag.lower={result.lower}"
    record = {"dataset": dataset, "scorer": scorer, "run_overrides": list(args.overrides),
              "max_false_refusals": args.max_false_refusals, **asdict(result), "overrides": overrides}
    stem.with_suffix(".yaml").write_text(yaml.safe_dump(record, sort_keys=False, allow_unicode=True), encoding="utf-8")
    plot(graded, result, f"CRAG calibration: {dataset}, scorer {scorer}", stem.with_suffix(".png"))
    print(f"{dataset}, scorer {scorer}: {result.answerable} answerable, {result.unanswerable} unanswerable questions")
    print(f"  lower {result.lower}: refuses {result.refusal_rate:.0%} of unanswerable, "
          f"{result.false_refusal_rate:.0%} of answerable (question AUC {result.question_auc:.3f})")
    print(f"  upper {result.upper}: keeps {result.passage_tpr:.0%} of passages with evidence, "
          f"{result.passage_fpr:.0%} of the others (passage AUC {result.passage_auc:.3f})")
    print(f"  wrote {stem}.yaml and {stem}.png")
    print("  use:", " ".join(["python run.py pipeline=crag", *args.overrides, overrides]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
