"""What each question cost: every chat-generator call, wherever it happens, with the tokens its replies report,
plus the calls a component makes outside a chat generator and reports itself."""

from __future__ import annotations

from collections.abc import Sequence

from haystack.dataclasses import GeneratedAnswer

from experiments.evaluation.metric_registry import Direction, Layer, declare
from experiments.evaluation.question_record import QuestionRecord, mean_score
from pipelines.instrumentation import ChatUsage

LLM_CALLS_PER_QUESTION = declare(
    "cost/llm_calls_per_question",
    Layer.COST,
    Direction.LOWER,
    "chat-model calls per question: every chat-generator call, wherever it happens (also inside "
    "`QueryExpander`, `LLMRanker` or an `Agent`), plus calls a component makes outside a chat generator and "
    "reports itself (`usage.llm_calls`, the span answerer)",
)
PROMPT_TOKENS_PER_QUESTION = declare(
    "cost/prompt_tokens_per_question",
    Layer.COST,
    Direction.LOWER,
    "prompt tokens per question of those calls, as their replies report them",
)
COMPLETION_TOKENS_PER_QUESTION = declare(
    "cost/completion_tokens_per_question",
    Layer.COST,
    Direction.LOWER,
    "completion tokens per question of those calls",
)
COST = (LLM_CALLS_PER_QUESTION, PROMPT_TOKENS_PER_QUESTION, COMPLETION_TOKENS_PER_QUESTION)
LLM_CALLS = declare("cost/llm_calls", Layer.COST, Direction.LOWER, "per question: its chat-model calls")
PROMPT_TOKENS = declare("cost/prompt_tokens", Layer.COST, Direction.LOWER, "per question: its prompt tokens")
COMPLETION_TOKENS = declare(
    "cost/completion_tokens", Layer.COST, Direction.LOWER, "per question: its completion tokens"
)
COSTS = (LLM_CALLS, PROMPT_TOKENS, COMPLETION_TOKENS)


def cost_scores(traced: ChatUsage, answer: GeneratedAnswer | None) -> dict[str, float]:
    """Traced chat-generator calls and their tokens, plus what an answerer that calls a model outside a chat
    generator reports as `usage.llm_calls` (with its tokens): the span answerer does."""
    reported = (answer.meta.get("usage") or {}) if answer is not None else {}
    untraced = int(reported.get("llm_calls", 0))
    own = (lambda key: int(reported.get(key, 0))) if "llm_calls" in reported else (lambda key: 0)
    return {
        LLM_CALLS: float(traced.calls + untraced),
        PROMPT_TOKENS: float(traced.prompt_tokens + own("prompt_tokens")),
        COMPLETION_TOKENS: float(traced.completion_tokens + own("completion_tokens")),
    }


def cost_summary(records: Sequence[QuestionRecord]) -> dict[str, float]:
    """The run's means per question (0 where no question has a cost)."""
    return {name: mean_score(records, per_question) or 0.0 for per_question, name in zip(COSTS, COST, strict=True)}
