"""Rank metrics over judged rankings, plus their means overall and per category.

Gains count relevant units first credited at each rank (see relevance.py). In doc mode gains are 0/1 and
every metric equals its trec_eval counterpart; docs/metrics.md has the formulas.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import numpy as np

from experiments.datasets.golden.items import GoldenItem
from experiments.evaluation.metric_registry import Direction, Layer, declare
from experiments.evaluation.relevance import Judged

METRICS = ("hit", "recall", "precision", "mrr", "map", "ndcg")
_AT_K = "{" + ",".join(METRICS) + "}_at_<k>"
declare(
    f"retrieval/{_AT_K}",
    Layer.RETRIEVAL,
    Direction.HIGHER,
    "mean over the judged questions of the pipeline's final ranking (its `retrieval_output`), `k` from "
    "`eval.ks`: the [formulas](#formulas)",
)
declare(
    f"context/{_AT_K}",
    Layer.RETRIEVAL,
    Direction.HIGHER,
    "the same on its `context_output`, the context handed to the generator",
)
declare(
    f"stage/<component>/{_AT_K}",
    Layer.RETRIEVAL,
    Direction.HIGHER,
    "the same on every component that outputs documents; per question (`per_question.jsonl`) only "
    "`recall_at_10`, `mrr_at_10` and `ndcg_at_10`",
)
declare(
    f"<view>/{_AT_K}",
    Layer.RETRIEVAL,
    Direction.HIGHER,
    "the same for a view the pipeline names under `views`",
)
declare(
    f"retrieval/{_AT_K}/cat/<category>",
    Layer.RETRIEVAL,
    Direction.HIGHER,
    "mean over the judged items of one category (`none` when the item has none). Characters MLflow rejects in a "
    "category (and `/`) become `_` in the name; two categories that end up with the same name are an error "
    "rather than being merged",
)
_UNSAFE_NAME = re.compile(r"[^\w.\- ]")  # MLflow metric names allow \w . - space and "/" (kept for levels)

# _IDEAL[n] = sum_{j=1..n} 1/log2(j+1): the DCG of n relevant units at ranks 1..n
_IDEAL: list[float] = [0.0]


def rank_metrics(judged: Judged, ks: Sequence[int]) -> dict[str, float]:
    """`{metric}_at_{k}` for every metric in METRICS and k in `ks`, each in [0, 1]."""
    if judged.n_units <= 0:
        raise ValueError(f"judged ranking has n_units={judged.n_units}; unjudgeable items have no metrics")
    if any(k < 1 for k in ks):
        raise ValueError(f"ks must be positive, got {list(ks)}")
    units = judged.n_units
    deepest = max(ks)
    _extend_ideal(min(units, deepest))
    gains = judged.gains[:deepest]
    found = relevant_ranks = first = 0
    ap_sum = dcg = 0.0
    # running totals after rank i, for i = 0..len(gains)
    totals = [(0, 0, 0, 0.0, 0.0)]
    for rank, gain in enumerate(gains, start=1):
        if gain:
            found += gain
            relevant_ranks += 1
            first = first or rank
            ap_sum += gain * relevant_ranks / rank
            dcg += gain / math.log2(rank + 1)
        totals.append((found, relevant_ranks, first, ap_sum, dcg))
    at_k = {k: _at_k(totals[min(k, len(gains))], k, units) for k in ks}
    return {f"{metric}_at_{k}": at_k[k][index] for index, metric in enumerate(METRICS) for k in ks}


def _at_k(totals: tuple[int, int, int, float, float], k: int, units: int) -> tuple[float, ...]:
    """(hit, recall, precision, mrr, map, ndcg) at k from the running totals at rank min(k, ranking length)."""
    found, relevant_ranks, first, ap_sum, dcg = totals
    return (
        1.0 if found else 0.0,
        found / units,
        relevant_ranks / k,
        1.0 / first if first else 0.0,
        ap_sum / units,
        min(1.0, dcg / _IDEAL[min(units, k)]),
    )


def aggregate(per_item: Sequence[dict[str, float]]) -> dict[str, float]:
    """Mean of each key over the items that have it (keys in first-seen order)."""
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    for metrics in per_item:
        for name, value in metrics.items():
            sums[name] = sums.get(name, 0.0) + value
            counts[name] = counts.get(name, 0) + 1
    return {name: total / counts[name] for name, total in sums.items()}


def by_category(
    items: Sequence[GoldenItem], per_item: Sequence[dict[str, float]], prefix: str
) -> dict[str, float]:
    """Per-category means named `{prefix}/{metric}/cat/{category}`, e.g. `retrieval/recall_at_5/cat/numeric`.

    Items without a category fall under "none"; characters MLflow rejects (and "/") become "_".
    """
    if len(items) != len(per_item):
        raise ValueError(f"by_category: {len(items)} items but {len(per_item)} metric dicts")
    groups: dict[str, list[dict[str, float]]] = {}
    for item, metrics in zip(items, per_item, strict=True):
        groups.setdefault(item.category or "none", []).append(metrics)
    names: dict[str, str] = {}
    for category in groups:
        name = _UNSAFE_NAME.sub("_", category)
        if name in names:
            raise ValueError(
                f"categories {names[name]!r} and {category!r} both map to metric name part {name!r}"
            )
        names[name] = category
    base = prefix.rstrip("/")
    return {
        f"{base}/{metric}/cat/{name}": value
        for name, category in names.items()
        for metric, value in aggregate(groups[category]).items()
    }


def _extend_ideal(n: int) -> None:
    while len(_IDEAL) <= n:
        _IDEAL.append(_IDEAL[-1] + 1.0 / math.log2(len(_IDEAL) + 1))


def latency_percentiles(prefix: str, values: Sequence[float]) -> dict[str, float]:
    """`{prefix}/p50_ms` and `{prefix}/p95_ms` of per-question milliseconds; nothing when there are none."""
    if not values:
        return {}
    p50, p95 = np.percentile(values, [50, 95])
    return {f"{prefix}/p50_ms": float(p50), f"{prefix}/p95_ms": float(p95)}
