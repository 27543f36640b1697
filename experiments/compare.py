"""Compare runs: paired tests on per-question scores, plus the side-by-side table and bar chart.

    python -m experiments.compare BASELINE CANDIDATE [CANDIDATE ...]   # diff, 95 % CI, p-value per metric
    python -m experiments.compare SWEEP_PARENT_ID                      # each child against the first one
    python -m experiments.compare --parent SWEEP_PARENT_ID             # the same

The first run is the baseline. Every comparison is printed, written as CSV and a forest plot under --out-dir,
and logged to MLflow (to the candidate run, or to the sweep's parent run).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from mlflow.entities import Run  # noqa: E402
from mlflow.tracking import MlflowClient  # noqa: E402
from rich.table import Table  # noqa: E402

from experiments.metric_names import lower_is_better  # noqa: E402
from experiments.paired_compare import DEFAULT_METRICS, compare_runs  # noqa: E402
from experiments.report import console  # noqa: E402
from experiments.tracking import tracking_uri  # noqa: E402

QUALITY = [
    "retrieval/hit_at_5",
    "retrieval/recall_at_10",
    "retrieval/mrr_at_10",
    "context/recall_at_10",
    "answer/f1",
    "answer/refusal_accuracy",
]
COST = ["latency/p95_ms", "time/index_seconds"]


def is_quality(metric: str) -> bool:
    """Scores in [0, 1] where higher is better: shown in bold when best, drawn on the quality panel."""
    return metric.startswith(("retrieval/", "context/", "answer/")) and not lower_is_better(metric) and "tokens" not in metric


def child_runs(client: MlflowClient, parent_run_id: str) -> list[Run]:
    experiment_id = client.get_run(parent_run_id).info.experiment_id
    runs = client.search_runs([experiment_id], filter_string=f"tags.mlflow.parentRunId = '{parent_run_id}'")
    return sorted(runs, key=lambda r: r.info.start_time)


def comparison_frame(runs: Sequence[Run], metrics: Sequence[str]) -> pd.DataFrame:
    rows = {_label(run): {m: run.data.metrics.get(m) for m in metrics} for run in runs}
    return pd.DataFrame.from_dict(rows, orient="index", columns=list(metrics))


def _label(run: Run) -> str:
    return f"{run.info.run_name} ({run.info.run_id[:6]})"


def print_frame(frame: pd.DataFrame, title: str) -> None:
    table = Table(title=title)
    table.add_column("run")
    best = {m: frame[m].max() for m in frame.columns if is_quality(m)}
    for metric in frame.columns:
        table.add_column(metric, justify="right")
    for label, row in frame.iterrows():
        cells = []
        for metric, value in row.items():
            text = "-" if pd.isna(value) else f"{value:.3f}" if metric in best else f"{value:.1f}"
            cells.append(f"[bold green]{text}[/]" if metric in best and value == best[metric] else text)
        table.add_row(str(label), *cells)
    console().print(table)


def plot_frame(frame: pd.DataFrame, path: Path) -> Path:
    """Quality metrics as grouped bars (one group per metric, one bar per run); cost metrics beside them."""
    quality = [m for m in frame.columns if is_quality(m) and frame[m].notna().any()]
    cost = [m for m in frame.columns if m not in quality and frame[m].notna().any()]
    fig, axes = plt.subplots(1, 1 + bool(cost), figsize=(5 + 1.6 * len(quality) + 3 * bool(cost), 4.8), squeeze=False)
    frame[quality].T.plot.bar(ax=axes[0][0], rot=20, ylim=(0, 1.05), legend=True)
    axes[0][0].set_title("quality (higher is better)")
    axes[0][0].legend(fontsize=8, loc="lower right")
    if cost:
        frame[cost].T.plot.bar(ax=axes[0][1], rot=20, legend=False)
        axes[0][1].set_title("cost (lower is better)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def report_sweep(parent_run_id: str, png: Path, metrics: Sequence[str] = (*QUALITY, *COST)) -> pd.DataFrame:
    """Prints the sweep's table, writes the chart and a CSV beside it, and logs both to the parent run.

    Each child is then tested against the first child on per-question scores, logged to the parent as well.
    """
    client = MlflowClient()
    children = child_runs(client, parent_run_id)
    frame = comparison_frame(children, metrics)
    print_frame(frame, f"sweep {parent_run_id}")
    plot_frame(frame, png)
    csv = png.with_suffix(".csv")
    frame.to_csv(csv)
    client.log_artifact(parent_run_id, str(png))
    client.log_artifact(parent_run_id, str(csv))
    finished = [run for run in children if run.info.status == "FINISHED"]
    for candidate in finished[1:]:
        try:
            compare_runs(client, finished[0].info.run_id, candidate.info.run_id, png.parent, log_to=parent_run_id)
        except LookupError as e:
            print(f"compare: paired tests skipped for {candidate.info.run_id}: {e}", file=sys.stderr)
    return frame


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_ids", nargs="*", help="baseline run id, then candidate run ids; or one sweep parent id")
    parser.add_argument("--parent", help="compare the children of this sweep parent run (and log the chart to it)")
    parser.add_argument("--metrics", nargs="+", default=[*QUALITY, *COST], help="run-level metrics of the table")
    parser.add_argument("--paired-metrics", nargs="+", default=list(DEFAULT_METRICS), help="per-question metrics to test")
    parser.add_argument("--all", action="store_true", help="test every per-question metric the runs share")
    parser.add_argument("--out", type=Path, default=Path("comparison.png"), help="bar chart; paired results go beside it")
    parser.add_argument("--tracking-uri", default="sqlite:///mlruns/mlflow.db")
    parser.add_argument("--markdown", action="store_true", help="also print the table as Markdown (for PRs and docs)")
    args = parser.parse_args(argv)
    if not args.run_ids and not args.parent:
        parser.error("give run ids or --parent")
    import mlflow

    mlflow.set_tracking_uri(tracking_uri(args.tracking_uri))
    client = MlflowClient()
    parent = args.parent or (args.run_ids[0] if len(args.run_ids) == 1 else None)
    try:
        if parent:
            if not child_runs(client, parent):
                parser.error(f"run {parent} has no child runs: give a sweep parent id, or two or more run ids")
            frame = report_sweep(parent, args.out, args.metrics)
            print(f"wrote {args.out} and logged it to run {parent}")
        else:
            runs = [client.get_run(r) for r in args.run_ids]
            frame = comparison_frame(runs, args.metrics)
            print_frame(frame, "runs")
            print(f"wrote {plot_frame(frame, args.out)}")
            metrics = None if args.all else args.paired_metrics
            for candidate in args.run_ids[1:]:
                try:
                    compare_runs(client, args.run_ids[0], candidate, args.out.parent, metrics)
                except LookupError as e:
                    print(f"compare: paired tests skipped for {candidate}: {e}", file=sys.stderr)
    except (LookupError, ValueError, mlflow.exceptions.MlflowException) as e:
        raise SystemExit(f"compare: {e}") from e
    if args.markdown:
        print(frame.to_markdown(floatfmt=".3f"))


if __name__ == "__main__":
    main()
