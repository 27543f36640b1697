"""Answers every golden question through the pipeline and scores all three layers.

The pipeline spec says what to feed and what to read (pipelines/spec.py): golden fields go to its inputs
(`question`, and `history` and `filters` where the item has them), and every view is scored as a layer: the
retrieval output (`retrieval/`), what reaches the prompt (`context/`), named views, every documents-producing
component (`stage/<component>/`), and the answer (`answer/`), read through the answer contract. Every question also
gets its route, its cost (every chat-generator call, wherever it happens) and its first broken layer
(experiments/evaluation/diagnosis.py); per-question scores are kept for paired tests.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from haystack import Document
from haystack.dataclasses import GeneratedAnswer
from tqdm import tqdm

from components.routers.routes import CONVERSATIONAL
from experiments.comparison.significance import mean_ci
from experiments.datasets.golden.items import GoldenItem
from experiments.evaluation.agent_metrics import agent_failure, agent_summary, tool_choice_scores
from experiments.evaluation.answer_metrics import ANSWER, F1, SELFCHECK, Similarity, answer_scores
from experiments.evaluation.context_metrics import CONTEXT, RECALL, context_scores
from experiments.evaluation.cost_metrics import cost_scores, cost_summary
from experiments.evaluation.degradation import degraded_scores, degraded_summary
from experiments.evaluation.diagnosis import (
    OK,
    ROUTING,
    Evidence,
    diagnosis_row,
    first_broken_layer,
    layer_counts,
)
from experiments.evaluation.grading_metrics import grading_record, grading_summary
from experiments.evaluation.judge import Judge
from experiments.evaluation.metric_registry import Direction, Layer, declare
from experiments.evaluation.metrics import aggregate, by_category, latency_percentiles, rank_metrics
from experiments.evaluation.mlflow_traces import QuestionTraces
from experiments.evaluation.query_metrics import query_scores, query_summary
from experiments.evaluation.question_record import QuestionRecord, mean_score, score_values
from experiments.evaluation.relevance import Corpus, Judged, unlocated_counts, unlocated_summary
from experiments.evaluation.relevance import judge as judge_ranking
from experiments.evaluation.routing_metrics import routed_wrong, routing_summary
from experiments.evaluation.settings import EvalSettings
from experiments.runs.interrupts import raise_if_interrupted
from pipelines.answer_contract import answer_fields
from pipelines.built import BuiltPipeline
from pipelines.errors import UserError
from pipelines.instrumentation import counting_chat_calls, timing_components

MAX_LOGGED_DOCS = 20
# Per question, the headline views keep every rank metric; the other views (stages, named views) these, enough for
# `experiments.comparison.compare` to test a stage such as the reranker question by question.
VIEW_RECORD_METRICS = ("recall_at_10", "mrr_at_10", "ndcg_at_10")
# Scores a question that retrieves nothing by design (a greeting, a question asked back) does not get.
RETRIEVING_ONLY = ("answer/", "selfcheck/", "context/")
# Every run logs a bootstrap CI for these, when it has them.
HEADLINE = ("retrieval/recall_at_10", "retrieval/mrr_at_10", "context/recall_at_10", RECALL, F1)

QUESTIONS = declare("eval/questions", Layer.RUN, Direction.NEITHER, "golden questions asked")
JUDGED_QUESTIONS = declare("eval/judged_questions", Layer.RUN, Direction.NEITHER,
                           "questions judged for retrieval: unanswerable items are not judged")
TRACED_QUESTIONS = declare("eval/traced_questions", Layer.RUN, Direction.NEITHER,
                           "questions logged as MLflow traces ([below](#per-question-traces))")
ITEMS_WITH_HISTORY = declare("eval/items_with_history", Layer.RUN, Direction.NEITHER,
                             "golden items with a chat history")
HISTORY_UNUSED = declare("eval/history_unused", Layer.RUN, Direction.NEITHER, "of those, the items whose history "
                         "the pipeline does not read (a `rewriter=none` baseline is the usual reason)")
declare("latency/{p50,p95}_ms", Layer.COST, Direction.LOWER, "median and 95th percentile of the time per question")
declare("latency/<component>/{p50,p95}_ms", Layer.COST, Direction.LOWER, "the same for each component")
declare("latency_ms", Layer.COST, Direction.LOWER, "per question: its time, end to end")
JUDGE_FAILURES = declare("answer/judge_failures", Layer.ANSWER, Direction.NEITHER, "failed judgements (exceptions, "
                         "schema failures, NaN): counted, never averaged in (0 failures without a judge)")
JUDGE_FAILED = declare("answer/judge_failed", Layer.ANSWER, Direction.NEITHER,
                       "per question: its failed judgements")
declare("<headline>/ci95_{low,high}", Layer.RUN, Direction.NEITHER, "bootstrap 95 % CI of "
        + ", ".join(f"`{name}`" for name in HEADLINE) + " ([below](#confidence-intervals-and-paired-tests))")


class EvalInputError(UserError, ValueError):
    """Golden items carry a field the pipeline cannot take, and dropping it would change what is measured."""


@dataclass(frozen=True)
class Evaluation:
    metrics: dict[str, float]
    per_question: list[QuestionRecord]
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
    corpus: Corpus | None = None,
) -> Evaluation:
    """`index_chunks` (doc id -> its chunks) lets the diagnosis tell chunking failures from retrieval misses;
    `similarity` scores `answer/semantic_similarity` and `llm_judge` the LLM-judged metrics (each skipped when None);
    `corpus` (doc id -> text) places documents that carry no span (see experiments/evaluation/relevance.py)."""
    _check_inputs(query, golden)
    start = time.perf_counter()
    views: dict[str, list[dict[str, float] | None]] = {}
    latencies: list[float] = []
    component_ms: dict[str, list[float]] = {}
    records: list[QuestionRecord] = []
    components = [instance for _, instance in query.pipeline.walk()]
    costs = query.answer_output is not None or bool(query.llm_components)  # else there is nothing to count
    with (
        timing_components() as timer,
        counting_chat_calls(components) as chat,
        QuestionTraces(settings.trace_sample, len(golden), timer, settings.trace_full) as traces,
    ):
        for index, item in enumerate(tqdm(golden, desc=f"evaluate {query.name}", unit="q", disable=not progress)):
            raise_if_interrupted()
            t0 = time.perf_counter()
            with traces.question(index, item.id):
                outputs = query.run(**pipeline_inputs(query, item))
            latencies.append((time.perf_counter() - t0) * 1000)
            for component, ms in timer.take().ms.items():
                component_ms.setdefault(component, []).append(ms)
            ranked = {"retrieval": [], **query.view_documents(outputs)}
            judged = {view: judge_ranking(docs, item, settings.min_overlap, corpus) for view, docs in ranked.items()}
            scores = {view: None if j is None else rank_metrics(j, settings.ks) for view, j in judged.items()}
            for view, value in scores.items():
                views.setdefault(view, []).append(value)
            answer = query.answer(outputs)
            layer_scores = _layer_scores(query, ranked, judged.get("context"), answer, item, settings, similarity)
            layer_scores |= (cost_scores(chat.take(), answer) if costs else {}) | unlocated_counts(ranked, corpus)
            degraded = query.degraded(outputs)
            layer_scores |= degraded_scores(degraded)
            if query.rewriter is not None:
                layer_scores |= query_scores(item, outputs.get(query.rewriter, {}))
            routed = query.route(outputs) if query.route_component is not None else None
            conversational = item.route in CONVERSATIONAL
            if conversational:  # nothing to retrieve or answer from: scored on its route and cost only
                layer_scores = {k: v for k, v in layer_scores.items() if not k.startswith(RETRIEVING_ONLY)}
            judge_errors = {} if conversational else _apply_judge(
                llm_judge, item, answer, ranked.get("context", []), layer_scores
            )
            grading = grading_record(outputs.get(query.grader, {})) if query.grader is not None else {}
            why_agent = agent_failure(answer.meta, item.tools) if answer is not None else None
            grade = grading.get("crag_label")
            layer = _first_broken_layer(query, item, routed, judged, layer_scores, index_chunks, settings, grade, why_agent)
            records.append(QuestionRecord(
                id=item.id,
                question=item.question,
                category=item.category or "none",
                answerable=item.answerable,
                latency_ms=round(latencies[-1], 2),
                layer=layer,
                reference=item.reference_answer,
                answer=answer_fields(answer) if answer is not None else {},
                scores=_view_scores(scores) | layer_scores,
                chunks=_logged_chunks(ranked),
                routing=_routing(item, routed, outputs.get(query.rewriter, {}) if query.rewriter is not None else None),
                extras=grading | ({"judge_errors": judge_errors} if judge_errors else {})
                | ({"agent_failure": why_agent} if why_agent else {}) | ({"degraded": degraded} if degraded else {}),
            ))
    metrics = _summarise(query, golden, settings, views, latencies, component_ms, records, costs)
    metrics[TRACED_QUESTIONS] = len(traces.trace_ids)
    return Evaluation(metrics, records, time.perf_counter() - start)


def pipeline_inputs(query: BuiltPipeline, item: GoldenItem) -> dict[str, Any]:
    """The golden fields the pipeline takes: the question always, history and filters where the item has them."""
    return query.request_inputs(item.question, item.history, item.filters)


def _check_inputs(query: BuiltPipeline, golden: Sequence[GoldenItem]) -> None:
    """Filters cannot be dropped silently: they decide which documents a question may see (tenants, ACLs)."""
    filtered = [item.id for item in golden if item.filters]
    if filtered and "filters" not in query.inputs:
        raise EvalInputError(
            f"{len(filtered)} golden item(s) carry filters (first: {filtered[0]!r}), but pipeline '{query.name}' has "
            "no `filters` input; add `inputs.filters: [<retriever>.filters, ...]` to its spec"
        )


def _input_summary(query: BuiltPipeline, golden: Sequence[GoldenItem]) -> dict[str, float]:
    """Items whose history this pipeline does not read (a `rewriter=none` baseline is the usual reason)."""
    with_history = sum(bool(item.history) for item in golden)
    if not with_history:
        return {}
    return {ITEMS_WITH_HISTORY: float(with_history), HISTORY_UNUSED: float(
        0 if "history" in query.inputs else with_history
    )}


def _first_broken_layer(
    query: BuiltPipeline,
    item: GoldenItem,
    routed: str | None,
    judged: dict[str, Judged | None],
    scores: dict[str, float],
    index_chunks: Mapping[str, Sequence[Document]] | None,
    settings: EvalSettings,
    grade: str | None,
    why_agent: str | None,
) -> str:
    """A wrong route first (only a pipeline with a router has a routing layer); a question that retrieves nothing
    by design is OK; else the first layer that lost the evidence or the answer."""
    if query.route_component is not None and routed_wrong(item.route, routed):
        return ROUTING
    if item.route in CONVERSATIONAL:
        return OK
    indexed = replace(item, rows=())  # table rows are not in the index: only quotes can be split across chunks
    evidence = Evidence(
        index=judge_ranking(_candidate_chunks(item, index_chunks), indexed, settings.min_overlap) if index_chunks else None,
        retrieval=judged["retrieval"],
        context=judged.get("context", judged["retrieval"]),
    )
    answer = scores if query.answer_output is not None else None
    return first_broken_layer(bool(item.answerable), evidence, answer, settings.pass_f1, grade, why_agent is not None)


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
    scores[JUDGE_FAILED] = float(len(judgement.errors))
    return judgement.errors


def evidence_doc_ids(item: GoldenItem) -> set[str]:
    """The documents that hold the item's evidence: where a chunk covering it would be."""
    return {span.doc_id for spans in item.evidence_spans for span in spans} | set(item.relevant_doc_ids)


def _candidate_chunks(item: GoldenItem, index_chunks: Mapping[str, Sequence[Document]]) -> list[Document]:
    return [chunk for doc_id in sorted(evidence_doc_ids(item)) for chunk in index_chunks.get(doc_id, ())]


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
        scores |= tool_choice_scores(answer.meta, item.tools) if answer is not None else {}
    return scores


def _view_scores(scores: Mapping[str, dict[str, float] | None]) -> dict[str, float]:
    """Every rank metric of the headline views; of the other views, those the paired comparison tests."""
    return {
        f"{view}/{name}": value
        for view, values in scores.items()
        for name, value in (values or {}).items()
        if view in ("retrieval", "context") or name in VIEW_RECORD_METRICS
    }


def _logged_chunks(ranked: Mapping[str, list[Document]]) -> dict[str, list[dict[str, Any]]]:
    return {
        view: [{"id": d.id, "doc_id": d.meta.get("doc_id"), "score": d.score} for d in docs[:MAX_LOGGED_DOCS]]
        for view, docs in ranked.items()
    }


def _routing(item: GoldenItem, routed: str | None, rewrite: Mapping[str, Any] | None) -> dict[str, Any]:
    """The route expected and taken, and the rewrite the question was searched with (a rewriter's question, or an
    expander's queries)."""
    routing: dict[str, Any] = {}
    if item.route is not None:
        routing["expected_route"] = item.route
    if routed is not None:
        routing["route"] = routed
    if rewrite is not None:
        routing["rewritten_question"] = rewrite.get("question", item.question)
        if "question" not in rewrite:
            routing["rewritten_queries"] = list(rewrite.get("queries") or [])
    return routing


def _summarise(
    query: BuiltPipeline,
    golden: Sequence[GoldenItem],
    settings: EvalSettings,
    views: dict[str, list[dict[str, float] | None]],
    latencies: list[float],
    component_ms: dict[str, list[float]],
    records: Sequence[QuestionRecord],
    costs: bool,
) -> dict[str, float]:
    """The run's metrics: every view's rank metrics, latencies, layer means, counts and the headline intervals."""
    metrics: dict[str, float] = {}
    for view, per_item in views.items():
        judged = [m for m in per_item if m is not None]
        metrics |= {f"{view}/{name}": value for name, value in aggregate(judged).items()}
    judged_items = [(item, m) for item, m in zip(golden, views["retrieval"], strict=True) if m is not None]
    metrics |= by_category([i for i, _ in judged_items], [m for _, m in judged_items], "retrieval")
    metrics[QUESTIONS] = len(golden)
    metrics[JUDGED_QUESTIONS] = len(judged_items)
    metrics |= latency_percentiles("latency", latencies)
    for component, values in component_ms.items():
        metrics |= latency_percentiles(f"latency/{component}", values)
    metrics |= _layer_summary(records, has_answer=query.answer_output is not None, costs=costs)
    metrics |= _input_summary(query, golden) | unlocated_summary(records) | degraded_summary(records)
    metrics |= query_summary(records) | grading_summary(records) | routing_summary(records)
    metrics |= layer_counts([record.layer for record in records])
    return metrics | _intervals(records, settings.confidence)


def _layer_summary(records: Sequence[QuestionRecord], has_answer: bool, costs: bool) -> dict[str, float]:
    """Context and answer means; cost where a model may be called (an answer stage, or an LLM on the query side)."""
    metrics = {name: value for name in CONTEXT if (value := mean_score(records, name)) is not None}
    if not costs:
        return metrics
    metrics |= cost_summary(records)
    if not has_answer:
        return metrics
    metrics |= {name: value for name in (*ANSWER, *SELFCHECK) if (value := mean_score(records, name)) is not None}
    metrics[JUDGE_FAILURES] = float(sum(r.score(JUDGE_FAILED) or 0.0 for r in records))
    return metrics | agent_summary([{k: float(v) for k, v in r.scores.items() if isinstance(v, int | float)}
                                    for r in records])


def _intervals(records: Sequence[QuestionRecord], confidence: float) -> dict[str, float]:
    """Bootstrap CI of the mean for each headline metric, over the questions that have it."""
    metrics = {}
    for name in HEADLINE:
        if values := score_values(records, name):
            interval = mean_ci(values, confidence)
            metrics |= {f"{name}/ci95_low": interval.low, f"{name}/ci95_high": interval.high}
    return metrics


