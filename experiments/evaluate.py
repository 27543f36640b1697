"""Answers every golden question through the pipeline and turns the rankings into metrics.

Three views of the same run: the designated retrieval output (`retrieval/`), what reaches the prompt
(`context/`), and every documents-producing component (`stage/<component>/`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from haystack import Document
from tqdm import tqdm

from experiments.golden import GoldenItem
from experiments.metrics import aggregate, by_category, rank_metrics
from experiments.relevance import judge
from experiments.tracing import timing_components
from pipelines.builder import BuiltPipeline

MAX_LOGGED_DOCS = 20


@dataclass(frozen=True)
class Evaluation:
    metrics: dict[str, float]
    per_question: list[dict[str, Any]]
    seconds: float


def evaluate(
    query: BuiltPipeline, golden: Sequence[GoldenItem], ks: Sequence[int], min_overlap: float, progress: bool = True
) -> Evaluation:
    start = time.perf_counter()
    views: dict[str, list[dict[str, float] | None]] = {}
    latencies: list[float] = []
    component_ms: dict[str, list[float]] = {}
    records = []
    with timing_components() as timer:
        for item in tqdm(golden, desc=f"evaluate {query.name}", unit="q", disable=not progress):
            t0 = time.perf_counter()
            outputs = query.run(query=item.question)
            latencies.append((time.perf_counter() - t0) * 1000)
            for component, ms in timer.take().items():
                component_ms.setdefault(component, []).append(ms)
            ranked = _views(query, outputs)
            scores = {view: _score(docs, item, ks, min_overlap) for view, docs in ranked.items()}
            for view, value in scores.items():
                views.setdefault(view, []).append(value)
            records.append(_record(item, ranked, scores, latencies[-1]))
    metrics = _summarise(golden, views, latencies, component_ms)
    return Evaluation(metrics, records, time.perf_counter() - start)


def _views(query: BuiltPipeline, outputs: dict[str, dict[str, Any]]) -> dict[str, list[Document]]:
    ranked = {"retrieval": query.documents_at(outputs, query.retrieval_output)}
    if query.context_output is not None:
        ranked["context"] = query.documents_at(outputs, query.context_output)
    for component, docs in query.stage_documents(outputs).items():
        ranked[f"stage/{component}"] = docs
    return ranked


def _score(docs: list[Document], item: GoldenItem, ks: Sequence[int], min_overlap: float) -> dict[str, float] | None:
    judged = judge(docs, item, min_overlap=min_overlap)
    return None if judged is None else rank_metrics(judged, ks)


def _record(
    item: GoldenItem, ranked: dict[str, list[Document]], scores: dict[str, dict[str, float] | None], latency_ms: float
) -> dict[str, Any]:
    record: dict[str, Any] = {
        "id": item.id,
        "question": item.question,
        "category": item.category or "none",
        "answerable": item.answerable,
        "latency_ms": round(latency_ms, 2),
    }
    for view, docs in ranked.items():
        record[f"{view}/chunks"] = [
            {"id": d.id, "doc_id": d.meta.get("doc_id"), "score": d.score} for d in docs[:MAX_LOGGED_DOCS]
        ]
    record |= {f"retrieval/{name}": value for name, value in (scores["retrieval"] or {}).items()}
    return record


def _summarise(
    golden: Sequence[GoldenItem],
    views: dict[str, list[dict[str, float] | None]],
    latencies: list[float],
    component_ms: dict[str, list[float]],
) -> dict[str, float]:
    metrics: dict[str, float] = {}
    for view, per_item in views.items():
        judged = [m for m in per_item if m is not None]
        metrics |= {f"{view}/{name}": value for name, value in aggregate(judged).items()}
    judged_items = [(item, m) for item, m in zip(golden, views["retrieval"], strict=True) if m is not None]
    metrics |= by_category([i for i, _ in judged_items], [m for _, m in judged_items], "retrieval")
    metrics["eval/questions"] = len(golden)
    metrics["eval/judged_questions"] = len(judged_items)
    metrics |= _latency("latency", latencies)
    for component, values in component_ms.items():
        metrics |= _latency(f"latency/{component}", values)
    return metrics


def _latency(prefix: str, values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    p50, p95 = np.percentile(values, [50, 95])
    return {f"{prefix}/p50_ms": float(p50), f"{prefix}/p95_ms": float(p95)}
