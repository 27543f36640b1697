"""Every metric a job logs, as the modules that compute them declare them, and which way each is better.

The declarations: experiments/evaluation/metric_registry.py; the job's own metrics (time, index, dataset):
experiments/runs/job_metrics.py. Importing every declaring module here is what makes the catalog whole, wherever it
is read from.
"""

from __future__ import annotations

from functools import cache

from experiments.evaluation import (
    agent_metrics,
    answer_metrics,
    context_metrics,
    cost_metrics,
    degradation,
    diagnosis,
    evaluate,
    grading_metrics,
    judge,
    metrics,
    query_metrics,
    relevance,
    routing_metrics,
)
from experiments.evaluation.metric_registry import Direction, MetricInfo, declared, find
from experiments.runs import job_metrics

# Every module that declares metrics (a test keeps the list complete), in the order docs/metrics.md lists a
# layer's metrics by: then in each module's own order.
DECLARING_MODULES = (
    metrics,
    relevance,
    degradation,
    context_metrics,
    answer_metrics,
    judge,
    query_metrics,
    routing_metrics,
    grading_metrics,
    agent_metrics,
    cost_metrics,
    evaluate,
    diagnosis,
    job_metrics,
)
_ORDER = [module.__name__ for module in DECLARING_MODULES]
METRICS: tuple[MetricInfo, ...] = tuple(sorted(declared(), key=lambda metric: _ORDER.index(metric.module)))


@cache
def describe(metric: str) -> MetricInfo | None:
    """The declaration a logged name falls under; None for a name no module declares (an older run's)."""
    return find(metric, METRICS)


def lower_is_better(metric: str) -> bool:
    """A metric declared lower-is-better; every other one, undeclared names included, compares as higher."""
    info = describe(metric)
    return info is not None and info.direction is Direction.LOWER
