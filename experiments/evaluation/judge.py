"""LLM-judged answer metrics (RAGAS faithfulness and response relevancy) through an OpenAI-compatible endpoint.

Only when `eval/judge` is chosen: small local models fail RAGAS's structured output (measured: SmolLM2 fails its
schema validation), so a judge must be an explicit choice. A failed judgement is counted in
`answer/judge_failures` and recorded with its reason; it never becomes a NaN or a 0 inside an average.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from experiments.evaluation.coroutines import run_coroutine
from experiments.evaluation.metric_registry import Direction, Layer, declare
from experiments.evaluation.settings import JudgeSettings
from pipelines.models import check_endpoint

Scorer = Callable[..., Awaitable[Any]]

FAITHFULNESS = declare(
    "answer/faithfulness",
    Layer.ANSWER,
    Direction.HIGHER,
    "RAGAS `Faithfulness`, LLM-judged, only with `eval/judge=...`: averaged over the judgements that succeeded",
)
RESPONSE_RELEVANCY = declare(
    "answer/response_relevancy",
    Layer.ANSWER,
    Direction.HIGHER,
    "RAGAS `AnswerRelevancy`, LLM-judged the same way",
)
JUDGED = (FAITHFULNESS, RESPONSE_RELEVANCY)


@dataclass
class Judgement:
    scores: dict[str, float] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)


class Judge:
    """Scores one answer with each RAGAS metric; every metric that raises is a counted failure."""

    def __init__(self, scorers: Mapping[str, Scorer], identity: str) -> None:
        """
        :param scorers: Metric name (e.g. `answer/faithfulness`) -> RAGAS `ascore`-like coroutine function taking
            `user_input`, `response` and `retrieved_contexts`.
        :param identity: What the run records as the judge model.
        """
        self.scorers = dict(scorers)
        self.identity = identity

    def judge(self, question: str, answer: str, contexts: Sequence[str]) -> Judgement:
        return run_coroutine(self._judge(question, answer, list(contexts)))

    async def _judge(self, question: str, answer: str, contexts: list[str]) -> Judgement:
        result = Judgement()
        for name, scorer in self.scorers.items():
            try:
                value = await scorer(user_input=question, response=answer, retrieved_contexts=contexts)
                score = float(getattr(value, "value", value))
            except Exception as e:  # a judge LLM fails in many ways: transport, schema, parsing
                result.errors[name] = f"{type(e).__name__}: {str(e)[:300]}"
                continue
            if score != score:  # NaN is a failure too, never a silent score
                result.errors[name] = "the judge returned NaN"
            else:
                result.scores[name] = score
        return result


def openai_compatible_judge(settings: JudgeSettings, embeddings: Any) -> Judge:
    """RAGAS Faithfulness and AnswerRelevancy with an instructor-wrapped OpenAI client on `settings.base_url`."""
    check_endpoint(asdict(settings), key="eval.judge")
    from openai import AsyncOpenAI

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from ragas.llms import llm_factory
        from ragas.metrics.collections import AnswerRelevancy, Faithfulness

    client = AsyncOpenAI(
        base_url=settings.base_url,
        api_key=os.environ.get(settings.api_key_env or "", "none"),
        timeout=settings.timeout,
        max_retries=settings.max_retries,
    )
    llm = llm_factory(settings.model, provider="openai", client=client, max_tokens=settings.max_tokens)
    faithfulness = Faithfulness(llm=llm)
    relevancy = AnswerRelevancy(llm=llm, embeddings=embeddings)

    async def relevancy_score(user_input: str, response: str, retrieved_contexts: list[str]) -> Any:
        return await relevancy.ascore(user_input=user_input, response=response)

    return Judge(
        {FAITHFULNESS: faithfulness.ascore, RESPONSE_RELEVANCY: relevancy_score},
        identity=f"openai-compatible:{settings.model}@{settings.base_url}",
    )
