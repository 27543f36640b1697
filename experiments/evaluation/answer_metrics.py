"""Answer-layer scores for one question: correctness against the reference, citations, support and refusal.

Token F1 and exact match follow SQuAD's normalisation (lowercase, no punctuation, no English articles) with jieba
words for Chinese. ROUGE-L runs `rouge_score` (the library RAGAS wraps) on the same tokens, because its default
tokenizer keeps only [a-z0-9] and scores every Chinese answer 0. chrF is RAGAS's, on characters.
"""

from __future__ import annotations

from collections import Counter
from functools import cache
from typing import Any

from haystack.dataclasses import GeneratedAnswer

from components.common.sentences import strip_citations
from components.common.words import answer_tokens
from experiments.evaluation.agent_metrics import agent_scores
from experiments.evaluation.judge import JUDGED
from experiments.evaluation.metric_registry import Direction, Layer, declare

F1 = declare(
    "answer/f1", Layer.ANSWER, Direction.HIGHER,
    "token F1 against `reference_answer`: 2·(c/p)·(c/r) / (c/p + c/r). For example `\"About 20 days.\"` "
    "against `\"20 days\"`: p = 3, r = 2, c = 2, F1 = 0.8",
)
EXACT_MATCH = declare(
    "answer/exact_match", Layer.ANSWER, Direction.HIGHER, "1 when answer and reference have equal token lists"
)
ROUGE_L = declare(
    "answer/rouge_l", Layer.ANSWER, Direction.HIGHER,
    "`rouge_score` ROUGE-L F-measure on the same tokens (its default tokenizer keeps only `[a-z0-9]`, "
    "which scores every Chinese answer 0)",
)
CHRF = declare(
    "answer/chrf", Layer.ANSWER, Direction.HIGHER, "RAGAS `CHRFScore` (sacrebleu chrF, characters) / 100"
)
SEMANTIC_SIMILARITY = declare(
    "answer/semantic_similarity", Layer.ANSWER, Direction.HIGHER,
    "RAGAS `SemanticSimilarity`: the cosine of the answer's and the reference's embeddings by the run's "
    "text embedder",
)
CITATION_ACCURACY = declare(
    "answer/citation_accuracy", Layer.ANSWER, Direction.HIGHER,
    "citations that point into the prompt and are cited by a supported sentence / all citations (0 for an "
    "uncited answer); refusals are excluded",
)
UNSUPPORTED_SENTENCE_RATE = declare(
    "answer/unsupported_sentence_rate", Layer.ANSWER, Direction.LOWER,
    "sentences whose cited chunks contain fewer than `answer.support_threshold` of their content words / "
    "sentences (an uncited sentence is unsupported)",
)
REFUSAL_ACCURACY = declare(
    "answer/refusal_accuracy", Layer.ANSWER, Direction.HIGHER,
    "refusals on unanswerable items: a refusal there scores 1",
)
FALSE_REFUSAL_RATE = declare(
    "answer/false_refusal_rate", Layer.ANSWER, Direction.LOWER,
    "refusals on answerable items: a refusal there scores 1 here and 0 on every correctness metric above",
)
ANSWER = (
    F1, EXACT_MATCH, ROUGE_L, CHRF, SEMANTIC_SIMILARITY, CITATION_ACCURACY, UNSUPPORTED_SENTENCE_RATE,
    REFUSAL_ACCURACY, FALSE_REFUSAL_RATE, *JUDGED,
)
REFUSED = declare(
    "answer/refused", Layer.ANSWER, Direction.NEITHER, "per question: 1 when the pipeline refused"
)
# The self-check loop (answer=llm, selfcheck.max_retries > 0): how often it retried, how much, and how often
# it refused.
FIRED_RATE = declare(
    "selfcheck/fired_rate", Layer.SELFCHECK, Direction.LOWER,
    "with `selfcheck.max_retries` > 0: the share of questions retried for unsupported sentences",
)
RETRIES_PER_QUESTION = declare(
    "selfcheck/retries_per_question", Layer.SELFCHECK, Direction.LOWER, "retries per question"
)
SELFCHECK_REFUSAL_RATE = declare(
    "selfcheck/refusal_rate", Layer.SELFCHECK, Direction.LOWER, "the share refused by the self-check"
)
SELFCHECK = (FIRED_RATE, RETRIES_PER_QUESTION, SELFCHECK_REFUSAL_RATE)


def token_f1(prediction: str, reference: str) -> float:
    pred, ref = answer_tokens(prediction), answer_tokens(reference)
    if not pred or not ref:
        return float(pred == ref)
    common = sum((Counter(pred) & Counter(ref)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(ref)
    return 2 * precision * recall / (precision + recall)


def exact_match(prediction: str, reference: str) -> float:
    return float(answer_tokens(prediction) == answer_tokens(reference))


def rouge_l(prediction: str, reference: str) -> float:
    """ROUGE-L F-measure on `answer_tokens` (so Chinese is scored on words, not dropped)."""
    return _rouge().score(reference, prediction)["rougeL"].fmeasure


@cache
def _rouge() -> Any:
    from rouge_score import rouge_scorer

    class _Tokens:
        def tokenize(self, text: str) -> list[str]:
            return answer_tokens(text)

    return rouge_scorer.RougeScorer(["rougeL"], tokenizer=_Tokens())


def chrf(prediction: str, reference: str) -> float:
    """RAGAS chrF (sacrebleu, character n-grams), scaled to [0, 1]."""
    return float(_chrf().score(reference=reference, response=prediction).value)


@cache
def _chrf() -> Any:
    from ragas.metrics.collections import CHRFScore

    return CHRFScore()


def ragas_embeddings(embedder: Any) -> Any:
    """A warmed-up Haystack text embedder as RAGAS embeddings.

    RAGAS's own `HaystackEmbeddingsWrapper` imports `AsyncPipeline` and fails on Haystack 3, hence this adapter.
    """
    from ragas.embeddings import BaseRagasEmbedding

    class _Embeddings(BaseRagasEmbedding):
        def embed_text(self, text: str, **kwargs: Any) -> list[float]:
            return list(embedder.run(text=text)["embedding"])

        async def aembed_text(self, text: str, **kwargs: Any) -> list[float]:
            return self.embed_text(text)

    return _Embeddings()


class Similarity:
    """RAGAS SemanticSimilarity (cosine of embeddings) with the run's own text embedder."""

    def __init__(self, embeddings: Any) -> None:
        from ragas.metrics.collections import SemanticSimilarity

        self._metric = SemanticSimilarity(embeddings=embeddings)

    def __call__(self, prediction: str, reference: str) -> float:
        return float(self._metric.score(reference=reference, response=prediction).value)


def answer_scores(
    answer: GeneratedAnswer | None, reference: str | None, answerable: bool, similarity: Similarity | None = None
) -> dict[str, float]:
    """Per-question answer scores; a key is absent when it does not apply (e.g. F1 on an unanswerable item)."""
    if answer is None:
        return {}
    meta = answer.meta
    refused = bool(meta.get("refused"))
    scores: dict[str, float] = {REFUSED: float(refused)}
    # Per question, so that their means are the run's rates and paired tests can compare them.
    scores[FALSE_REFUSAL_RATE if answerable else REFUSAL_ACCURACY] = float(refused)
    text = strip_citations(answer.data or "")
    if answerable and reference:
        scores |= {
            F1: 0.0 if refused else token_f1(text, reference),
            EXACT_MATCH: 0.0 if refused else exact_match(text, reference),
            ROUGE_L: 0.0 if refused else rouge_l(text, reference),
            CHRF: 0.0 if refused else chrf(text, reference),
        }
        if similarity is not None:
            scores[SEMANTIC_SIMILARITY] = 0.0 if refused else similarity(text, reference)
    if not refused:
        scores |= citation_scores(meta)
    return scores | _selfcheck_scores(meta) | agent_scores(meta)


def _selfcheck_scores(meta: dict[str, Any]) -> dict[str, float]:
    """What the self-check loop (components.answer.self_check) did to this answer; nothing when the stage has none."""
    if "selfcheck_retries" not in meta:
        return {}
    retries = int(meta["selfcheck_retries"])
    return {
        FIRED_RATE: float(retries > 0),
        RETRIES_PER_QUESTION: float(retries),
        SELFCHECK_REFUSAL_RATE: float(meta.get("refusal_reason") == "selfcheck"),
    }


def citation_scores(meta: dict[str, Any]) -> dict[str, float]:
    """Read through the answer contract (pipelines/answer_contract.py); needs its optional per-sentence report.

    Citation accuracy: the share of citations (`citations` plus `invalid_citations`) that back a supported sentence.
    """
    sentences = meta.get("sentences")
    if sentences is None:
        return {}
    cited = [c.get("marker") for c in meta["citations"]] + list(meta.get("invalid_citations") or [])
    backed = {n for s in sentences if s["supported"] for n in s["citations"]}
    scores = {CITATION_ACCURACY: len([n for n in cited if n in backed]) / len(cited) if cited else 0.0}
    if sentences:
        scores[UNSUPPORTED_SENTENCE_RATE] = sum(not s["supported"] for s in sentences) / len(sentences)
    return scores
