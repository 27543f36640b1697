"""The routing layer: whether a router sent each question where its golden `route` says, and what each route costs.

`router/accuracy` and the confusion matrix are scored only for pipelines whose routes are ragtune's route names
(components.routers.routes.ROUTES: pipeline=adaptive); the cost and latency per route apply to any pipeline with a route
component (crag's correct/ambiguous/incorrect too).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from components.routers.routes import CONVERSATIONAL, ROUTES
from experiments.evaluation.cost_metrics import COSTS
from experiments.evaluation.metric_registry import Direction, Layer, declare
from experiments.evaluation.metrics import latency_percentiles
from experiments.evaluation.question_record import QuestionRecord, mean_score

ROUTER_ACCURACY = declare(
    "router/accuracy", Layer.ROUTING, Direction.HIGHER,
    "`pipeline=adaptive`: the share of questions with a golden `route` that took it (with a confusion "
    "matrix, `router_confusion.csv` and `.png`)",
)
LABELLED_QUESTIONS = declare(
    "router/labelled_questions", Layer.ROUTING, Direction.NEITHER, "the questions `router/accuracy` is over"
)
declare(
    "route/<route>_rate", Layer.ROUTING, Direction.NEITHER,
    "the share of routed questions that took each route, for any pipeline with a route component (crag's "
    "correct/ambiguous/incorrect too)",
)
declare(
    "cost/{llm_calls,prompt_tokens,completion_tokens}_per_question/route/<route>",
    Layer.ROUTING,
    Direction.LOWER,
    "what the questions that took each route cost (as `cost/llm_calls_per_question` ...)",
)
declare(
    "latency/route/<route>/{p50,p95}_ms", Layer.ROUTING, Direction.LOWER,
    "the time per question of the questions that took each route",
)


def routed_wrong(expected: str | None, routed: str | None) -> bool:
    """A question the route it took cannot serve: a conversational one that retrieved (or took the other
    conversational route), or a retrieving one answered without retrieval. Retrieving routes may stand in for
    each other: the answer then says whether the choice mattered."""
    if expected is None:
        return False
    if expected in CONVERSATIONAL:
        return routed != expected
    return routed in CONVERSATIONAL


def routing_summary(records: Sequence[QuestionRecord]) -> dict[str, float]:
    """The share, cost and latency of each route wherever a route was recorded; router/accuracy where routes are
    route names."""
    metrics: dict[str, float] = {}
    routed = [r for r in records if r.routing.get("route") is not None]
    for route in sorted({r.routing["route"] for r in routed}):
        rows = [r for r in routed if r.routing["route"] == route]
        metrics[f"route/{route}_rate"] = len(rows) / len(routed)
        for name in COSTS:
            if (mean := mean_score(rows, name)) is not None:
                metrics[f"{name}_per_question/route/{route}"] = mean
        metrics |= latency_percentiles(f"latency/route/{route}", [r.latency_ms for r in rows])
    labelled = _labelled(records)
    if labelled:
        metrics[ROUTER_ACCURACY] = sum(expected == routed for expected, routed in labelled) / len(labelled)
        metrics[LABELLED_QUESTIONS] = float(len(labelled))
    return metrics


def _labelled(records: Sequence[QuestionRecord]) -> list[tuple[str, str]]:
    """(golden route, route taken) of each labelled question, when the pipeline's routes are route names (else there
    is no router to score)."""
    pairs = [(r.routing["expected_route"], r.routing["route"]) for r in records
             if r.routing.get("expected_route") and r.routing.get("route") is not None]
    return pairs if pairs and all(routed in ROUTES for _, routed in pairs) else []


def confusion(records: Sequence[QuestionRecord]) -> dict[tuple[str, str], int]:
    return dict(Counter(_labelled(records)))


def write_confusion(records: Sequence[QuestionRecord], out_dir: Path, title: str) -> list[Path]:
    """router_confusion.csv and .png (rows: the golden route, columns: the route taken); nothing without labels."""
    counts = confusion(records)
    if not counts:
        return []
    matrix = np.array([[counts.get((label, route), 0) for route in ROUTES] for label in ROUTES])
    csv = out_dir / "router_confusion.csv"
    csv.write_text("labelled\\routed," + ",".join(ROUTES) + "\n"
                   + "".join(f"{label}," + ",".join(map(str, row)) + "\n" for label, row in zip(ROUTES, matrix, strict=True)))
    figure = Figure(figsize=(6.4, 5.2))
    axes = figure.subplots()
    axes.imshow(matrix, cmap="Blues")
    for (i, j), n in np.ndenumerate(matrix):
        axes.text(j, i, str(n), ha="center", va="center", color="white" if n > matrix.max() / 2 else "black")
    axes.set_xticks(range(len(ROUTES)), ROUTES, rotation=30, ha="right")
    axes.set_yticks(range(len(ROUTES)), ROUTES)
    axes.set_xlabel("route taken")
    axes.set_ylabel("golden route")
    accuracy = np.trace(matrix) / matrix.sum()
    axes.set_title(f"{title}: router accuracy {accuracy:.3f} ({np.trace(matrix)}/{matrix.sum()})")
    figure.tight_layout()
    png = out_dir / "router_confusion.png"
    figure.savefig(png, dpi=120)
    return [csv, png]
