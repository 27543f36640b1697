"""Answers every golden question through the pipeline and scores all three layers.

Views of the same run: the designated retrieval output (`retrieval/`), what reaches the prompt (`context/`),
every documents-producing component (`stage/<component>/`), and the answer (`answer/`). Every question also
gets its first broken layer (experiments/diagnosis.py), and per-question scores are kept for paired tests.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from haystack import Document
from haystack.dataclasses import GeneratedAnswer
from tqdm import tqdm

from experiments import metric_names
from experiments.answer_metrics import Similarity, answer_scores
from experiments.context_metrics import context_scores
from experiments.diagnosis import Evidence, diagnosis_row, first_broken_layer, layer_counts
from experiments.golden import GoldenItem
from experiments.judge import Judge
from experiments.metrics import aggregate, by_category, rank_metrics
from experiments.relevance import Judged
from experiments.relevance import judge as judge_ranking
from experiments.significance import mean_ci
from experiments.tracing import timing_components
from pipelines.builder import BuiltPipeline

MAX_LOGGED_DOCS = 20
@dataclass(frozen=True)
class EvalSettings:
    ks: Sequence[int]
    min_overlap: float = 0.5
    # An answerable question passes when its answer reaches this token F1 (and has no unsupported sentence).
    pass_f1: float = 0.5
    redundancy_threshold: float = 0.9
    confidence: float = 0.95


@dataclass(frozen=True)
class Evaluation:
    metrics: dict[str, float]
    per_question: list[dict[str, Any]]
    seconds: float

    @property
    def diagnosis(self) -> list[dict[str, Any]]:
        """One row per question for diagnosis.csv/.md: a projection of the per-question records."""
        return [diagnosis_row(record) for record in self.per_question]


def evaluate(
    query: BuiltPipeline,
    golden: Sequence[GoldenItem],
    settings: EvalSettings,
    index_chunks: Mapping[str, Sequence[Document]] | None = None,
    similarity: Similarity | None = None,
    llm_judge: Judge | None = None,
    progress: bool = True,
) -> Evaluation:
    """`index_chunks` (doc id -> its chunks) lets the diagnosis tell chunking failures from retrieval misses;
    `similarity` scores `answer/semantic_similarity` and `llm_judge` the LLM-judged metrics (each skipped when None)."""
    start = time.perf_counter()
    views: dict[str, list[dict[str, float] | None]] = {}
    latencies: list[float] = []
    component_ms: dict[str, list[float]] = {}
    records: list[dict[str, Any]] = []
    with timing_components() as timer:
        for item in tqdm(golden, desc=f"evaluate {query.name}", unit="q", disable=not progress):
            t0 = time.perf_counter()
            outputs = query.run(query=item.question)
            latencies.append((time.perf_counter() - t0) * 1000)
            runs = timer.take()
            for component, ms in runs.ms.items():
                component_ms.setdefault(component, []).append(ms)
            ranked = _views(query, outputs)
            judged = {view: judge_ranking(docs, item, settings.min_overlap) for view, docs in ranked.items()}
            scores = {view: None if j is None else rank_metrics(j, settings.ks) for view, j in judged.items()}
            for view, value in scores.items():
                views.setdefault(view, []).append(value)
            answer = query.answer(outputs)
            layer_scores = _layer_scores(query, ranked, judged.get("context"), answer, item, settings, similarity)
            layer_scores["cost/llm_calls"] = float(_llm_calls(runs.calls, query.llm_components, answer))
            judge_errors = _apply_judge(llm_judge, item, answer, ranked.get("context", []), layer_scores)
            layer = _first_broken_layer(query, item, judged, layer_scores, index_chunks, settings)
            record = _record(item, ranked, scores, latencies[-1], answer, layer_scores) | {"layer": layer}
            records.append(record | ({"judge_errors": judge_errors} if judge_errors else {}))
    metrics = _summarise(golden, views, latencies, component_ms)
    metrics |= _layer_summary(records, has_answer=query.answer_output is not None)
    metrics |= layer_counts([record["layer"] for record in records])
    metrics |= _intervals(records, settings.confidence)
    return Evaluation(metrics, records, time.perf_counter() - start)


def _first_broken_layer(
    query: BuiltPipeline,
    item: GoldenItem,
    judged: dict[str, Judged | None],
    scores: dict[str, float],
    index_chunks: Mapping[str, Sequence[Document]] | None,
    settings: EvalSettings,
) -> str:
    evidence = Evidence(
        index=judge_ranking(_candidate_chunks(item, index_chunks), item, settings.min_overlap) if index_chunks else None,
        retrieval=judged["retrieval"],
        context=judged.get("context", judged["retrieval"]),
    )
    answer = scores if query.answer_output is not None else None
    return first_broken_layer(bool(item.answerable), evidence, answer, settings.pass_f1)


def _apply_judge(
    judge: Judge | None,
    item: GoldenItem,
    answer: GeneratedAnswer | None,
    context: list[Document],
    scores: dict[str, float],
) -> dict[str, str]:
    """Adds the judge's scores to `scores` and counts its failures there; returns the failure reasons."""
    if judge is None or answer is None or answer.meta.get("refused"):
        return {}
    judgement = judge.judge(item.question, answer.data or "", [doc.content or "" for doc in context])
    scores |= judgement.scores
    scores["answer/judge_failed"] = float(len(judgement.errors))
    return judgement.errors


def _llm_calls(calls: Mapping[str, int], chat_generators: frozenset[str], answer: GeneratedAnswer | None) -> int:
    """Runs of chat generators, plus calls that answerers without a chat socket report as usage `llm_calls`."""
    reported = int((answer.meta.get("usage") or {}).get("llm_calls", 0)) if answer is not None else 0
    return sum(calls.get(name, 0) for name in chat_generators) + reported


def _views(query: BuiltPipeline, outputs: dict[str, dict[str, Any]]) -> dict[str, list[Document]]:
    ranked = {"retrieval": query.documents_at(outputs, query.retrieval_output)}
    if query.context_output is not None:
        ranked["context"] = query.documents_at(outputs, query.context_output)
    for component, docs in query.stage_documents(outputs).items():
        ranked[f"stage/{component}"] = docs
    return ranked


def _candidate_chunks(item: GoldenItem, index_chunks: Mapping[str, Sequence[Document]]) -> list[Document]:
    """The index's chunks of the documents that hold the item's evidence: where a covering chunk would be."""
    doc_ids = {span.doc_id for spans in item.evidence_spans for span in spans} | set(item.relevant_doc_ids)
    return [chunk for doc_id in sorted(doc_ids) for chunk in index_chunks.get(doc_id, ())]


def _layer_scores(
    query: BuiltPipeline,
    ranked: dict[str, list[Document]],
    context_judged: Judged | None,
    answer: GeneratedAnswer | None,
    item: GoldenItem,
    settings: EvalSettings,
    similarity: Similarity | None,
) -> dict[str, float]:
    scores: dict[str, float] = {}
    if query.context_output is not None:
        scores |= context_scores(ranked["context"], item, context_judged, settings.redundancy_threshold)
    if query.answer_output is not None:
        scores |= answer_scores(answer, item.reference_answer, bool(item.answerable), similarity)
    return scores


def _record(
    item: GoldenItem,
    ranked: dict[str, list[Document]],
    scores: dict[str, dict[str, float] | None],
    latency_ms: float,
    answer: GeneratedAnswer | None,
    layer_scores: dict[str, float],
) -> dict[str, Any]:
    record: dict[str, Any] = {
        "id": item.id,
        "question": item.question,
        "category": item.category or "none",
        "answerable": item.answerable,
        "latency_ms": round(latency_ms, 2),
        "reference": item.reference_answer,
    }
    if answer is not None:
        record |= {
            "answer": answer.data,
            "refused": bool(answer.meta.get("refused")),
            "citations": answer.meta.get("citations", []),
            "unsupported_sentences": answer.meta.get("unsupported_sentences", []),
        }
    for view, docs in ranked.items():
        record[f"{view}/chunks"] = [
            {"id": d.id, "doc_id": d.meta.get("doc_id"), "score": d.score} for d in docs[:MAX_LOGGED_DOCS]
        ]
    for view in ("retrieval", "context"):
        record |= {f"{view}/{name}": value for name, value in (scores.get(view) or {}).items()}
    return record | layer_scores


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


def _layer_summary(records: list[dict[str, Any]], has_answer: bool) -> dict[str, float]:
    metrics = {name: value for name in metric_names.CONTEXT if (value := _mean(records, name)) is not None}
    if not has_answer:
        return metrics
    metrics |= {name: value for name, value in ((n, _mean(records, n)) for n in metric_names.ANSWER) if value is not None}
    metrics["answer/judge_failures"] = float(sum(r.get("answer/judge_failed", 0) for r in records))
    metrics["cost/llm_calls_per_question"] = _mean(records, "cost/llm_calls") or 0.0
    metrics["cost/prompt_tokens_per_question"] = _mean(records, "cost/prompt_tokens") or 0.0
    metrics["cost/completion_tokens_per_question"] = _mean(records, "cost/completion_tokens") or 0.0
    return metrics


def _mean(records: Sequence[dict[str, Any]], name: str) -> float | None:
    values = [r[name] for r in records if r.get(name) is not None]
    return float(np.mean(values)) if values else None


def _intervals(records: list[dict[str, Any]], confidence: float) -> dict[str, float]:
    """Bootstrap CI of the mean for each headline metric, over the questions that have it."""
    metrics = {}
    for name in metric_names.HEADLINE:
        values = [r[name] for r in records if r.get(name) is not None]
        if values:
            interval = mean_ci(values, confidence)
            metrics |= {f"{name}/ci95_low": interval.low, f"{name}/ci95_high": interval.high}
    return metrics


def _latency(prefix: str, values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    p50, p95 = np.percentile(values, [50, 95])
    return {f"{prefix}/p50_ms": float(p50), f"{prefix}/p95_ms": float(p95)}
