"""The results table printed at the end of a job."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from experiments.comparison.significance import ci_note
from experiments.evaluation.agent_metrics import STEPS_PER_QUESTION, TOOL_CHOICE_ACCURACY
from experiments.evaluation.answer_metrics import ANSWER, SELFCHECK
from experiments.evaluation.context_metrics import CONTEXT, RAGAS_PRECISION, RAGAS_RECALL
from experiments.evaluation.cost_metrics import COST
from experiments.evaluation.evaluate import JUDGE_FAILURES
from experiments.evaluation.grading_metrics import LABEL_ACCURACY
from experiments.evaluation.query_metrics import QUERY
from experiments.evaluation.routing_metrics import ROUTER_ACCURACY

RANK_METRICS = ("hit", "recall", "precision", "mrr", "map", "ndcg")
# RAGAS's non-LLM context metrics compare whole chunks with short quotes and read 0 by construction on quote-based
# golden sets (docs/metrics.md): logged for parity with RAGAS users, left out of the printed table.
NOT_PRINTED = frozenset({RAGAS_PRECISION, RAGAS_RECALL})
# Printed with the layers when a run has them: the router (pipeline=adaptive), the CRAG grader (pipeline=crag) and
# the agent (pipeline=agentic).
CONTROL = (ROUTER_ACCURACY, LABEL_ACCURACY, TOOL_CHOICE_ACCURACY, STEPS_PER_QUESTION)
LAYER_METRICS = tuple(
    m for m in (*QUERY, *CONTEXT, *ANSWER, JUDGE_FAILURES, *SELFCHECK, *CONTROL, *COST) if m not in NOT_PRINTED
)


def console() -> Console:
    """Terminal width on a terminal; wide enough for whole tables in logs and CI, where rich would wrap at 80."""
    return Console() if sys.stdout.isatty() else Console(width=200)


def print_results(
    pipeline: str,
    dataset: Any,
    metrics: Mapping[str, float],
    ks: Sequence[int],
    stages: Sequence[tuple[str, bool]] = (),
) -> None:
    """`stages`: (stage name, is a `none` slot) in pipeline order; without them, every logged stage, by name."""
    out = console()
    table = Table(title=f"{pipeline} on {dataset.name} ({dataset.language}, {int(metrics['eval/judged_questions'])} judged questions)")
    table.add_column("view @k")
    for name in RANK_METRICS:
        table.add_column(name, justify="right")
    for k in ks:
        table.add_row(f"retrieval @{k}", *_cells(metrics, "retrieval", k))
    stages = stages or [(name, False) for name in sorted({key.split("/")[1] for key in metrics if key.startswith("stage/")})]
    k = 10 if 10 in ks else ks[-1]
    for stage, passes_through in stages:
        label = f"stage {stage} (none: as above)" if passes_through else f"stage {stage}"
        table.add_row(f"{label} @{k}", *_cells(metrics, f"stage/{stage}", k))
    out.print(table)
    out.print(
        f"index {metrics['time/index_seconds']:.1f}s (cache hit: {bool(metrics['index/cache_hit'])}, "
        f"{int(metrics['index/chunks'])} chunks) · eval {metrics['time/eval_seconds']:.1f}s · "
        f"latency p50 {metrics['latency/p50_ms']:.1f} ms, p95 {metrics['latency/p95_ms']:.1f} ms"
    )
    layers = [(name, metrics[name]) for name in LAYER_METRICS if name in metrics]
    if layers:
        summary = Table(title="query, context and answer layers (95 % bootstrap CI where logged)")
        summary.add_column("metric")
        summary.add_column("value", justify="right")
        for name, value in layers:
            low, high = metrics.get(f"{name}/ci95_low"), metrics.get(f"{name}/ci95_high")
            ci = f"  [{low:.3f}, {high:.3f}]" if low is not None and high is not None else ""
            summary.add_row(name, (f"{value:.3f}" if abs(value) < 100 else f"{value:.0f}") + ci)
        out.print(summary)
        if note := ci_note(int(metrics["eval/judged_questions"])):
            out.print(f"warning: the intervals above: {note}", markup=False, highlight=False)
    failures = {k.split("/", 1)[1]: int(v) for k, v in metrics.items() if k.startswith("diagnosis/") and v}
    if failures:
        out.print("diagnosis (first broken layer per question): " + ", ".join(f"{k} {v}" for k, v in failures.items()))


def _cells(metrics: Mapping[str, float], view: str, k: int) -> list[str]:
    return [f"{metrics[f'{view}/{m}_at_{k}']:.3f}" if f"{view}/{m}_at_{k}" in metrics else "-" for m in RANK_METRICS]


def print_skipped_files(skipped: Mapping[str, str]) -> None:
    """Corpus files that were not indexed, each with its reason: never dropped silently."""
    if not skipped:
        return
    out = console()
    out.print(f"[yellow]{len(skipped)} corpus file(s) skipped, not indexed[/] (also in the run's skipped_files.json):")
    for path, reason in skipped.items():
        out.print(f"  {path}: {reason}", markup=False, highlight=False)
