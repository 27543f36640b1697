"""Candidate against baseline on the questions both runs answered: difference, 95 % CI and p-value per metric."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import mlflow
import pandas as pd
from matplotlib.figure import Figure
from mlflow.tracking import MlflowClient
from rich.table import Table

from experiments.comparison.significance import PairedComparison, paired
from experiments.evaluation.answer_metrics import ANSWER, SELFCHECK
from experiments.evaluation.context_metrics import CONTEXT
from experiments.evaluation.question_record import QuestionRecord
from experiments.evaluation.report import console
from experiments.runs.metric_catalog import lower_is_better
from pipelines.run_layout import PER_QUESTION_FILE

LAYERS = ("retrieval/", "stage/", "context/", "answer/", "selfcheck/", "cost/")
# Shown (and plotted) by default; `--all` shows every per-question metric.
DEFAULT_METRICS = (
    "retrieval/hit_at_5",
    "retrieval/recall_at_10",
    "retrieval/mrr_at_10",
    "retrieval/ndcg_at_10",
    # The reranker's own ranking (the retrieval view is the candidates it reranks).
    "stage/reranker/mrr_at_10",
    "context/recall_at_10",
    *(m for m in CONTEXT if m.startswith(("context/precision", "context/recall", "context/tokens"))),
    *ANSWER,
    *SELFCHECK,
    "cost/prompt_tokens",
    "cost/completion_tokens",
    "latency_ms",
)


def load_per_question(client: MlflowClient, run_id: str) -> dict[str, QuestionRecord]:
    """The run's per-question records by question id (the `per_question.jsonl` artifact every job logs)."""
    try:
        path = mlflow.artifacts.download_artifacts(run_id=run_id, artifact_path=PER_QUESTION_FILE)
    except Exception as e:
        raise LookupError(
            f"run {run_id} has no {PER_QUESTION_FILE} artifact ({e}); was it logged by run.py?"
        ) from e
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    records = [QuestionRecord.from_json(json.loads(line)) for line in lines if line.strip()]
    return {r.id: r for r in records}


def per_question_metrics(records: Iterable[QuestionRecord]) -> list[str]:
    """Numeric per-question scores, in first-seen order (latency first, as each record lists it)."""
    names: dict[str, None] = {}
    for record in records:
        names.setdefault("latency_ms", None)
        for key in record.scores:
            if record.score(key) is not None and key.startswith(LAYERS) and "/cat/" not in key:
                names.setdefault(key, None)
    return list(names)


def compare_records(
    baseline: Mapping[str, QuestionRecord],
    candidate: Mapping[str, QuestionRecord],
    metrics: Sequence[str] | None = None,
    confidence: float = 0.95,
) -> list[PairedComparison]:
    """One paired comparison per metric, over the questions both runs answered (same id, same question) where
    both have a value. Sets generated apart reuse ids (`gen-0001`), so an id alone does not make a pair."""
    shared = [q for q in baseline if q in candidate and baseline[q].question == candidate[q].question]
    if not shared:
        reused = sum(qid in candidate for qid in baseline)
        detail = f" ({reused} question ids match, asking other questions)" if reused else ""
        raise ValueError(f"the two runs share no question{detail}; were they run on the same golden set?")
    names = metrics or per_question_metrics(baseline[q] for q in shared)
    results = []
    for name in names:
        values = [(baseline[q].score(name), candidate[q].score(name)) for q in shared]
        pairs = [(a, b) for a, b in values if a is not None and b is not None]
        if pairs:
            results.append(paired(name, [a for a, _ in pairs], [b for _, b in pairs], confidence))
    return results


def comparisons_frame(comparisons: Sequence[PairedComparison]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "metric": c.metric,
                "baseline": c.baseline,
                "candidate": c.candidate,
                "diff": c.diff,
                "ci_low": c.low,
                "ci_high": c.high,
                "p_value": c.p_value,
                "n": c.n,
            }
            for c in comparisons
        ]
    ).set_index("metric")


def print_comparisons(comparisons: Sequence[PairedComparison], title: str, alpha: float = 0.05) -> None:
    table = Table(title=title)
    for column in ("metric", "baseline", "candidate", "diff", "95% CI", "p", "n"):
        table.add_column(column, justify="left" if column == "metric" else "right")
    for c in comparisons:
        better = (c.diff < 0) if lower_is_better(c.metric) else (c.diff > 0)
        style = "" if c.p_value >= alpha or c.diff == 0 else "bold green" if better else "bold red"
        diff = f"[{style}]{c.diff:+.3f}[/]" if style else f"{c.diff:+.3f}"
        table.add_row(
            c.metric, _fmt(c.baseline), _fmt(c.candidate), diff, f"[{c.low:+.3f}, {c.high:+.3f}]", f"{c.p_value:.3f}", str(c.n)
        )
    console().print(table)
    console().print(f"green/red: significant at p < {alpha} (paired permutation test) and better/worse for the candidate")


def plot_comparisons(comparisons: Sequence[PairedComparison], path: Path, title: str) -> Path:
    """A forest plot: each metric's difference (candidate - baseline) with its CI; cost and latency apart."""
    quality = [c for c in comparisons if not lower_is_better(c.metric) or c.metric.startswith("answer/")]
    cost = [c for c in comparisons if c not in quality]
    panels = [(quality, "quality (difference, candidate - baseline)"), (cost, "cost (difference)")]
    panels = [(items, label) for items, label in panels if items]
    fig = Figure(figsize=(6.5 * len(panels), 0.35 * max(len(quality), len(cost), 4) + 1.5))
    axes = fig.subplots(1, len(panels))
    axes = [axes] if len(panels) == 1 else list(axes)
    for ax, (items, label) in zip(axes, panels, strict=True):
        y = list(range(len(items)))[::-1]
        for row, c in zip(y, items, strict=True):
            ax.errorbar(c.diff, row, xerr=[[c.diff - c.low], [c.high - c.diff]], fmt="o", color=_color(c), capsize=3)
        ax.axvline(0, color="grey", lw=0.8)
        ax.set_yticks(y, [f"{c.metric} (p={c.p_value:.2f})" for c in items], fontsize=8)
        ax.set_title(label, fontsize=10)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    return path


def _color(c: PairedComparison, alpha: float = 0.05) -> str:
    if c.p_value >= alpha or c.diff == 0:
        return "grey"
    better = (c.diff < 0) if lower_is_better(c.metric) else (c.diff > 0)
    return "tab:green" if better else "tab:red"


def _fmt(value: float) -> str:
    return f"{value:.3f}" if abs(value) < 100 else f"{value:.0f}"


def compare_runs(
    client: MlflowClient,
    baseline_id: str,
    candidate_id: str,
    out_dir: Path,
    metrics: Sequence[str] | None = DEFAULT_METRICS,
    log_to: str | None = None,
    title: str | None = None,
) -> list[PairedComparison]:
    """Prints the paired table, writes CSV + PNG to `out_dir`, and logs both to `log_to` (default: candidate).

    `metrics=None` compares every per-question metric the two runs share; `title` defaults to the run names.
    """
    baseline, candidate = load_per_question(client, baseline_id), load_per_question(client, candidate_id)
    shared = [m for m in per_question_metrics(baseline.values()) if m in set(per_question_metrics(candidate.values()))]
    names = shared if metrics is None else [m for m in metrics if m in shared]
    if not names:
        raise ValueError(f"runs {baseline_id} and {candidate_id} share none of the metrics {list(metrics or [])}")
    comparisons = compare_records(baseline, candidate, names)
    title = title or f"{_name(client, candidate_id)} vs baseline {_name(client, baseline_id)}"
    print_comparisons(comparisons, title)
    stem = out_dir / f"paired_{candidate_id[:8]}_vs_{baseline_id[:8]}"
    csv = stem.with_suffix(".csv")
    out_dir.mkdir(parents=True, exist_ok=True)
    comparisons_frame(comparisons).to_csv(csv)
    png = plot_comparisons(comparisons, stem.with_suffix(".png"), title)
    print(f"wrote {csv} and {png}")
    target = log_to or candidate_id
    client.log_artifact(target, str(csv), "compare")
    client.log_artifact(target, str(png), "compare")
    return comparisons


def _name(client: MlflowClient, run_id: str, width: int = 40) -> str:
    """Run names carry the job's overrides and can be long; the id tells runs apart."""
    name = client.get_run(run_id).info.run_name or ""
    return f"{name if len(name) <= width else name[: width - 1] + '…'} ({run_id[:6]})"
