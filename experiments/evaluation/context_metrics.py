"""Context-layer scores for one question, on exactly the chunks that reach the prompt.

`context/precision` (share of context chunks that cover evidence) and `context/recall` (share of evidence units
the context covers) use the chunk-invariant span judgement of experiments/evaluation/relevance.py. RAGAS's non-LLM variants
are logged beside them as `context/ragas_precision` and `context/ragas_recall`, but they compare each whole chunk
with each quote by Levenshtein similarity, so a 500-character chunk that contains a quote verbatim still scores
0 (measured: see docs/metrics.md). `context/id_precision` and `context/id_recall` are RAGAS's ID-based metrics on
source doc ids. The rank metrics (`context/recall_at_k` ...) come from experiments/evaluation/metrics.py.
"""

from __future__ import annotations

import warnings
from functools import cache
from typing import Any

from haystack import Document
from rapidfuzz import fuzz

from components.context.token_budget import token_count
from experiments.datasets.golden.items import GoldenItem
from experiments.evaluation.coroutines import run_coroutine
from experiments.evaluation.metric_registry import Direction, Layer, declare
from experiments.evaluation.relevance import Judged

PRECISION = declare(
    "context/precision", Layer.CONTEXT, Direction.HIGHER,
    "share of prompt chunks that cover evidence: chunks with a positive gain / chunks (the span judgement "
    "above, so it survives chunking ablations)",
)
RECALL = declare(
    "context/recall", Layer.CONTEXT, Direction.HIGHER,
    "share of evidence units the prompt covers: units covered / units (span-based, as above)",
)
RAGAS_PRECISION = declare(
    "context/ragas_precision", Layer.CONTEXT, Direction.HIGHER,
    "RAGAS `NonLLMContextPrecisionWithReference`, with the evidence quotes as reference contexts. It "
    "compares each whole chunk with each quote by normalised Levenshtein similarity (threshold 0.5), so a "
    "chunk much longer than the quote scores 0 even when it contains the quote verbatim: a 330-character "
    "chunk holding a 56-character quote gets 0 (`tests/experiments/test_context_metrics.py`), while an "
    "85-character one gets 1. With 500-character chunks and quote-based golden sets it reads 0.000 on every "
    "run, so it is logged to MLflow for comparison with other RAGAS users but left out of the results table "
    "`run.py` prints, and never used as a headline metric",
)
RAGAS_RECALL = declare(
    "context/ragas_recall", Layer.CONTEXT, Direction.HIGHER,
    "RAGAS `NonLLMContextRecall` against the same quotes, by the same whole-chunk similarity: it reads low, "
    "and is logged but not printed, for the same reason as `context/ragas_precision`",
)
ID_PRECISION = declare(
    "context/id_precision", Layer.CONTEXT, Direction.HIGHER,
    "RAGAS `IDBasedContextPrecision` on source doc ids (the ids are de-duplicated by RAGAS; the relevant ids "
    "are the docs that hold the evidence, or `relevant_doc_ids`)",
)
ID_RECALL = declare(
    "context/id_recall", Layer.CONTEXT, Direction.HIGHER, "RAGAS `IDBasedContextRecall` on the same doc ids"
)
TOKENS = declare(
    "context/tokens", Layer.CONTEXT, Direction.LOWER,
    "words in the prompt's chunks (SQuAD-normalised, jieba words for Chinese): the same count whatever the "
    "generator's tokenizer",
)
REDUNDANCY = declare(
    "context/redundancy", Layer.CONTEXT, Direction.LOWER,
    "share of chunks that nearly repeat a higher one: whose rapidfuzz `ratio` with a higher-ranked chunk "
    "is at least `eval.redundancy_threshold` (0.9)",
)
CONTEXT = (PRECISION, RECALL, RAGAS_PRECISION, RAGAS_RECALL, ID_PRECISION, ID_RECALL, TOKENS, REDUNDANCY)


def context_tokens(docs: list[Document]) -> int:
    """Words (jieba words for Chinese) in the context: comparable across generators, unlike model tokens."""
    return sum(token_count(doc.content or "") for doc in docs)


def redundancy(docs: list[Document], threshold: float = 0.9) -> float:
    """Share of chunks that nearly repeat a higher-ranked chunk (rapidfuzz ratio >= threshold)."""
    if len(docs) < 2:
        return 0.0
    texts = [doc.content or "" for doc in docs]
    repeats = sum(
        any(fuzz.ratio(texts[i], texts[j]) / 100 >= threshold for j in range(i)) for i in range(1, len(texts))
    )
    return repeats / len(texts)


def context_scores(
    docs: list[Document], item: GoldenItem, judged: Judged | None, redundancy_threshold: float
) -> dict[str, float]:
    """Scores of the context that reached the prompt; `judged` is its span judgement (None if unjudgeable)."""
    scores = {
        TOKENS: float(context_tokens(docs)),
        REDUNDANCY: redundancy(docs, redundancy_threshold),
    }
    if judged is not None:
        scores[PRECISION] = sum(gain > 0 for gain in judged.gains) / len(judged.gains) if judged.gains else 0.0
        scores[RECALL] = sum(judged.gains) / judged.n_units
    if item.answerable and item.evidence:
        contexts = [doc.content or "" for doc in docs]
        evidence = list(item.evidence)
        scores[RAGAS_PRECISION] = _ragas("NonLLMContextPrecisionWithReference", contexts, evidence)
        scores[RAGAS_RECALL] = _ragas("NonLLMContextRecall", contexts, evidence)
    relevant = list(item.relevant_doc_ids) or sorted(
        {s.doc_id for spans in item.evidence_spans for s in spans} | set(item.rows)
    )
    if item.answerable and relevant:
        ids = [str(doc.meta.get("doc_id", doc.id)) for doc in docs]
        scores[ID_PRECISION] = _ragas_ids("IDBasedContextPrecision", ids, relevant)
        scores[ID_RECALL] = _ragas_ids("IDBasedContextRecall", ids, relevant)
    return scores


def _ragas(name: str, contexts: list[str], references: list[str]) -> float:
    if not contexts:
        return 0.0
    return _score(name, retrieved_contexts=contexts, reference_contexts=references)


def _ragas_ids(name: str, ids: list[str], relevant: list[str]) -> float:
    if not ids:
        return 0.0
    return _score(name, retrieved_context_ids=ids, reference_context_ids=relevant)


def _score(name: str, **sample: Any) -> float:
    from ragas.dataset_schema import SingleTurnSample

    return float(run_coroutine(_metric(name).single_turn_ascore(SingleTurnSample(**sample))))


@cache
def _metric(name: str) -> Any:
    """RAGAS 0.4 ships these only in the legacy `ragas.metrics` namespace (its collections API lacks them)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import ragas.metrics

        return getattr(ragas.metrics, name)()
