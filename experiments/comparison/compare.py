"""Compare runs: paired tests on per-question scores, plus the side-by-side table and bar chart.

    ragtune compare BASELINE CANDIDATE [CANDIDATE ...]   # diff, 95 % CI, p-value per metric
    ragtune compare SWEEP_PARENT_ID                      # each finished child against the baseline
    ragtune compare --parent SWEEP_PARENT_ID [--baseline pipeline=bm25]

The first run is the baseline; in a sweep, the child with the `--baseline` override (`+compare.baseline=...` on the
sweep's command line), else the first finished job in override order. Runs are labelled by the overrides that
differ between them. Every comparison is printed, written as CSV and a forest plot beside the chart
(--out; by default outputs/compare/<short run ids>-<time>/comparison.png, under the git-ignored outputs/
of the folder it runs from), each path it wrote is printed, and the paired results are logged to MLflow
(to the candidate run, or with the chart and table to the sweep's parent run).
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from mlflow.entities import Run
from mlflow.tracking import MlflowClient
from rich.table import Table

from experiments.comparison.paired_compare import DEFAULT_METRICS, compare_runs
from experiments.evaluation.report import console
from experiments.runs.metric_catalog import lower_is_better
from experiments.runs.sweep import child_runs, pick_baseline, run_labels
from experiments.runs.tracking import TRACKING_HELP, connect
from pipelines.errors import UserError
from pipelines.run_layout import BASELINE_TAG, GOLDEN_FINGERPRINT_TAG

QUALITY = [
    "retrieval/hit_at_5",
    "retrieval/recall_at_10",
    "retrieval/mrr_at_10",
    "context/recall_at_10",
    "answer/f1",
    "answer/refusal_accuracy",
]
COST = ["latency/p95_ms", "time/index_seconds"]
LABEL_WIDTH = 40  # legend labels wrap here
OUT_ROOT = Path("outputs/compare")  # beside run.py's outputs/ (git-ignored), under the folder it runs from
MAX_BAR_RUNS = 8  # more runs (an Optuna study's trials) read better as a coloured table than as bars


def is_quality(metric: str) -> bool:
    """Scores in [0, 1] where higher is better: shown in bold when best, drawn on the quality panel."""
    return metric.startswith(("retrieval/", "context/", "answer/")) and not lower_is_better(metric) and "tokens" not in metric


def comparison_frame(runs: Sequence[Run], labels: Sequence[str], metrics: Sequence[str]) -> pd.DataFrame:
    """One row per run, indexed by its label (the CSV's `run` column)."""
    rows = [[run.data.metrics.get(m) for m in metrics] for run in runs]
    return pd.DataFrame(rows, index=pd.Index(list(labels), name="run"), columns=list(metrics))


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
    """Quality metrics as grouped bars (one group per metric, one bar per run); each cost metric on its own scale.

    The legend sits below the panels and panels widen with the number of runs, so long labels never cover bars.
    Beyond MAX_BAR_RUNS runs it draws `_heatmap` instead.
    """
    quality = [m for m in frame.columns if is_quality(m) and frame[m].notna().any()]
    cost = [m for m in frame.columns if m not in quality and frame[m].notna().any()]
    if not quality and not cost:
        raise ValueError(f"none of the runs logged any of the metrics {list(frame.columns)}")
    if len(frame) > MAX_BAR_RUNS:
        return _heatmap(frame[quality + cost], path)
    bar_group = 0.5 + 0.28 * len(frame)  # inches per metric group
    widths = ([max(4.0, bar_group * len(quality))] if quality else []) + [max(1.8, bar_group)] * len(cost)
    width = sum(widths) + 1.0
    fig = Figure(figsize=(width, 4.2), layout="constrained")
    axes = fig.subplots(1, len(widths), width_ratios=widths, squeeze=False)
    panels = list(axes[0])
    if quality:
        _bars(frame[quality], panels.pop(0), "quality (higher is better)", ylim=(0, 1.05))
    for metric, ax in zip(cost, panels, strict=True):
        _bars(frame[[metric]], ax, f"{metric}\n(lower is better)")
        ax.set_xticks([])  # the title names the metric
    labels = [textwrap.fill(str(label), LABEL_WIDTH) for label in frame.index]
    handles = axes[0][0].get_legend_handles_labels()[0]
    fig.legend(handles, labels, loc="outside lower center", ncol=_legend_columns(labels, width), fontsize=8, frameon=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    return path


def _heatmap(frame: pd.DataFrame, path: Path) -> Path:
    """One row per run and one column per metric, each cell showing its value and shaded within its column from
    the worst run (light) to the best (dark), so the best runs of every metric stand out among many."""
    values = frame.to_numpy(dtype=float)
    shade = np.full(values.shape, np.nan)
    for col, metric in enumerate(frame.columns):
        column = values[:, col]
        low, high = np.nanmin(column), np.nanmax(column)
        rank = (column - low) / (high - low) if high > low else np.full(column.shape, 0.5)
        shade[:, col] = rank if is_quality(metric) else 1 - rank  # cost: lower is better
    label_inches = 0.06 * max(len(str(label)) for label in frame.index)
    fig = Figure(figsize=(label_inches + 1.1 * len(frame.columns) + 0.5, 0.26 * len(frame) + 1.4), layout="constrained")
    ax = fig.subplots()
    ax.imshow(np.ma.masked_invalid(shade), cmap="Greens", vmin=-0.2, vmax=1.2, aspect="auto")
    for (row, col), value in np.ndenumerate(values):
        text = "–" if np.isnan(value) else f"{value:.3f}" if is_quality(frame.columns[col]) else f"{value:.0f}"
        dark = not np.isnan(shade[row, col]) and shade[row, col] > 0.6
        ax.text(col, row, text, ha="center", va="center", fontsize=7, color="white" if dark else "black")
    ax.set_xticks(range(len(frame.columns)), [m.replace("/", "\n") for m in frame.columns], fontsize=7)
    ax.xaxis.tick_top()
    ax.set_yticks(range(len(frame)), [str(label) for label in frame.index], fontsize=7)
    ax.tick_params(length=0)
    ax.set_title(f"{len(frame)} runs; each column shaded from its worst run (light) to its best (dark)", fontsize=9)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    return path


def _legend_columns(labels: Sequence[str], width: float) -> int:
    """As many legend entries side by side as fit the figure's width (inches) at 8 pt."""
    entry = 0.45 + 0.07 * max(len(line) for label in labels for line in label.splitlines())
    return max(1, min(len(labels), int(width // entry)))


def _bars(frame: pd.DataFrame, ax: Axes, title: str, ylim: tuple[float, float] | None = None) -> None:
    frame.T.plot.bar(ax=ax, rot=0, ylim=ylim, legend=False, width=0.8)
    ax.set_xticks(ax.get_xticks(), [m.replace("/", "\n") for m in frame.columns], fontsize=8)
    ax.set_title(title, fontsize=9)
    ax.grid(axis="y", alpha=0.3)


def report_sweep(
    parent_run_id: str, png: Path, metrics: Sequence[str] = (*QUALITY, *COST), baseline: str | None = None
) -> pd.DataFrame:
    """Prints the table of the sweep's finished children, writes the chart and a CSV beside it, logs both to the parent.

    Each finished child is then tested against the baseline (`baseline`, an override of one job; else the first
    finished job in override order) on per-question scores, logged to the parent as well.
    """
    client = MlflowClient()
    children = child_runs(client, parent_run_id)
    choice = pick_baseline(children, baseline)
    if choice is None:
        raise LookupError(f"no child run of sweep {parent_run_id} finished; there is nothing to compare")
    labels = dict(zip((run.info.run_id for run in children), run_labels(children), strict=True))
    finished = [run for run in children if run.info.status == "FINISHED"]
    frame = comparison_frame(finished, [labels[run.info.run_id] for run in finished], metrics)
    print_frame(frame, f"sweep {parent_run_id}")
    plot_frame(frame, png)
    frame.to_csv(png.with_suffix(".csv"))
    client.log_artifact(parent_run_id, str(png))
    client.log_artifact(parent_run_id, str(png.with_suffix(".csv")))
    print(f"wrote {png} and {png.with_suffix('.csv')}, logged to run {parent_run_id}")
    print(f"warning: {choice.note}" if choice.fallback else choice.note, file=sys.stderr if choice.fallback else sys.stdout)
    client.set_tag(parent_run_id, BASELINE_TAG, labels[choice.run.info.run_id])
    candidates = [run for run in finished if run.info.run_id != choice.run.info.run_id]
    paired_tests(client, choice.run, candidates, labels, png.parent, DEFAULT_METRICS, parent_run_id)
    return frame


def paired_tests(
    client: MlflowClient,
    baseline: Run,
    candidates: Sequence[Run],
    labels: Mapping[str, str],
    out_dir: Path,
    metrics: Sequence[str] | None,
    log_to: str | None = None,
) -> None:
    """Paired tests of each candidate against the baseline; a run without per-question records, or one that answered
    other questions (an Optuna study's test-part runs, a set generated apart that reuses its ids), is skipped,
    named."""
    golden = baseline.data.tags.get(GOLDEN_FINGERPRINT_TAG)
    for candidate in candidates:
        if golden is not None and candidate.data.tags.get(GOLDEN_FINGERPRINT_TAG, golden) != golden:
            print(f"compare: paired tests skipped for {labels[candidate.info.run_id]}: it answered another golden set "
                  "than the baseline", file=sys.stderr)
            continue
        title = f"{labels[candidate.info.run_id]} vs baseline {labels[baseline.info.run_id]}"
        try:
            compare_runs(client, baseline.info.run_id, candidate.info.run_id, out_dir, metrics, log_to, title)
        except (LookupError, ValueError) as e:
            print(f"compare: paired tests skipped for {labels[candidate.info.run_id]}: {e}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_ids", nargs="*", help="baseline run id, then candidate run ids; or one sweep parent id")
    parser.add_argument("--parent", help="compare the children of this sweep parent run (and log the chart to it)")
    parser.add_argument("--metrics", nargs="+", default=[*QUALITY, *COST], help="run-level metrics of the table")
    parser.add_argument("--paired-metrics", nargs="+", default=list(DEFAULT_METRICS), help="per-question metrics to test")
    parser.add_argument("--all", action="store_true", help="test every per-question metric the runs share")
    parser.add_argument("--out", type=Path, help="bar chart; paired results go beside it (default: "
                        f"{OUT_ROOT}/<short run ids>-<time>/comparison.png)")
    parser.add_argument("--tracking-uri", help=TRACKING_HELP)
    parser.add_argument("--markdown", action="store_true", help="also print the table as Markdown (for PRs and docs)")
    parser.add_argument("--baseline", help="sweep only: the override of the baseline job, e.g. pipeline=bm25")
    args = parser.parse_args(argv)
    if not args.run_ids and not args.parent:
        parser.error("give run ids or --parent")
    import mlflow

    parent = args.parent or (args.run_ids[0] if len(args.run_ids) == 1 else None)
    if args.baseline and not parent:
        parser.error("--baseline picks a job of a sweep; with run ids, the first one is the baseline")
    out = args.out or default_chart([parent] if parent else args.run_ids)
    try:
        connect(args.tracking_uri, key="--tracking-uri")
        client = MlflowClient()
        if parent:
            if not child_runs(client, parent):
                parser.error(f"run {parent} has no child runs: give a sweep parent id, or two or more run ids")
            frame = report_sweep(parent, out, args.metrics, args.baseline)
        else:
            paired_metrics = None if args.all else args.paired_metrics
            frame = compare_given_runs(client, args.run_ids, args.metrics, out, paired_metrics)
    except (LookupError, ValueError, UserError, mlflow.exceptions.MlflowException) as e:
        print(f"compare: {e}", file=sys.stderr)
        return 2
    if args.markdown:
        print(frame.to_markdown(floatfmt=".3f"))
    return 0


def default_chart(run_ids: Sequence[str]) -> Path:
    """The chart's path unless --out names one: a folder of its own per comparison, named by the runs (at most
    three short ids) and the time, so its files neither land unnamed in the current folder nor overwrite an
    earlier comparison's."""
    more = f"+{len(run_ids) - 3}" if len(run_ids) > 3 else ""
    runs = "-".join(run_id[:8] for run_id in run_ids[:3]) + more
    return OUT_ROOT / f"{runs}-{datetime.now():%Y-%m-%d_%H-%M-%S}" / "comparison.png"


def compare_given_runs(
    client: MlflowClient, run_ids: Sequence[str], metrics: Sequence[str], png: Path, paired_metrics: Sequence[str] | None
) -> pd.DataFrame:
    """The table and chart of the runs, then each against the first (the baseline) on per-question scores."""
    runs = [client.get_run(run_id) for run_id in run_ids]
    labels = run_labels(runs)
    frame = comparison_frame(runs, labels, metrics)
    print_frame(frame, "runs")
    print(f"wrote {plot_frame(frame, png)}")
    by_id = dict(zip(run_ids, labels, strict=True))
    paired_tests(client, runs[0], runs[1:], by_id, png.parent, paired_metrics)
    return frame


if __name__ == "__main__":
    sys.exit(main())
