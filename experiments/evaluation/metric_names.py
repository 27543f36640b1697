"""The fixed names of the query, context and answer layers, shared by evaluation, the report, compare and the gate."""

from __future__ import annotations

QUERY = ("query/rewrites_per_question", "query/rewritten_share", "query/fallbacks", "query/fidelity")
CONTEXT = (
    "context/precision",
    "context/recall",
    "context/ragas_precision",
    "context/ragas_recall",
    "context/id_precision",
    "context/id_recall",
    "context/tokens",
    "context/redundancy",
)
ANSWER = (
    "answer/f1",
    "answer/exact_match",
    "answer/rouge_l",
    "answer/chrf",
    "answer/semantic_similarity",
    "answer/citation_accuracy",
    "answer/unsupported_sentence_rate",
    "answer/refusal_accuracy",
    "answer/false_refusal_rate",
    "answer/faithfulness",
    "answer/response_relevancy",
)
# The self-check loop (answer=llm, selfcheck.max_retries > 0): how often it retried, how much, and how often it refused.
SELFCHECK = ("selfcheck/fired_rate", "selfcheck/retries_per_question", "selfcheck/refusal_rate")
# Printed with the layers when a run has them: the router (pipeline=adaptive), the CRAG grader (pipeline=crag) and the
# agent (pipeline=agentic).
CONTROL = ("router/accuracy", "crag/label_accuracy", "agent/tool_choice_accuracy", "agent/steps_per_question")
COST = ("cost/llm_calls_per_question", "cost/prompt_tokens_per_question", "cost/completion_tokens_per_question")
# Every run logs a bootstrap CI for these, when it has them.
HEADLINE = ("retrieval/recall_at_10", "retrieval/mrr_at_10", "context/recall_at_10", "context/recall", "answer/f1")
LOWER_IS_BETTER = (
    "answer/unsupported_sentence_rate",
    "answer/false_refusal_rate",
    "context/redundancy",
    "context/tokens",
    "query/fallbacks",
    "selfcheck/",
    "cost/",
    "latency",
)


def lower_is_better(metric: str) -> bool:
    return any(metric.startswith(prefix) for prefix in LOWER_IS_BETTER)
