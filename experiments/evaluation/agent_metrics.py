"""What an agent did per question (pipeline=agentic): its steps, tool calls, whether it chose the tools the golden
item names, and why it stopped, read from the answer's `agent` meta (components/agents/agent_answer.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from components.agents.agent_answer import BY_FLOOR, BY_MODEL, BY_NONE, FINAL_ANSWER, STOP_REASONS
from experiments.evaluation.metric_registry import Direction, Layer, declare

# Every way a run can end, so that each question scores 0 or 1 on each and the means are rates.
ENDINGS = (FINAL_ANSWER, *STOP_REASONS)
# Endings that mean the agent went round in circles.
LOOPS = ("repeated_call", "max_agent_steps")
# Endings that mean it ran out of tokens or time.
BUDGETS = ("token_budget_exceeded", "timeout", "length")

TOOL_CHOICE_ACCURACY = declare(
    "agent/tool_choice_accuracy", Layer.AGENT, Direction.HIGHER,
    "`pipeline=agentic`: the share of questions with golden `tools` whose agent called exactly those tools",
)
TOOL_SEQUENCE_ACCURACY = declare(
    "agent/tool_sequence_accuracy", Layer.AGENT, Direction.HIGHER,
    "the share that also first called them in the golden order",
)
STEPS_PER_QUESTION = declare(
    "agent/steps_per_question", Layer.AGENT, Direction.NEITHER, "tool steps per question"
)
LOOP_ABORTS = declare(
    "agent/loop_aborts", Layer.AGENT, Direction.NEITHER,
    "runs aborted in a loop (a repeated call, or the step limit)",
)
declare("agent/tool_calls/<tool>", Layer.AGENT, Direction.NEITHER, "calls per question of each tool")
declare(
    "agent/stop_reason/<ending>", Layer.AGENT, Direction.NEITHER,
    f"the share of runs that ended each way: `{FINAL_ANSWER}`, or a stop reason ("
    + ", ".join(f"`{reason}`" for reason in STOP_REASONS) + ")",
)
declare(
    "agent/answered_by/<who>", Layer.AGENT, Direction.NEITHER,
    f"the share of answers each gave: `{BY_MODEL}` (its final_answer), `{BY_FLOOR}` (the answer stage on the run's "
    f"context, the model having stopped without one), `{BY_NONE}` (a refusal that says why it stopped)",
)
STEPS = declare("agent/steps", Layer.AGENT, Direction.NEITHER, "per question: the agent's tool steps")
LOOP_ABORTED = declare(
    "agent/loop_aborted", Layer.AGENT, Direction.NEITHER, "per question: 1 when the run was aborted in a loop"
)
TOOL_CHOICE_CORRECT = declare(
    "agent/tool_choice_correct", Layer.AGENT, Direction.HIGHER,
    "per question: 1 when it called exactly the golden tools",
)
TOOL_SEQUENCE_CORRECT = declare(
    "agent/tool_sequence_correct", Layer.AGENT, Direction.HIGHER,
    "per question: 1 when it also first called them in order",
)


def agent_scores(meta: Mapping[str, Any]) -> dict[str, float]:
    """Per question: `agent/steps`, `agent/tool_calls/<tool>`, `agent/stop_reason/<ending>` and
    `agent/answered_by/<who>` (0 or 1), and `agent/loop_aborted`; nothing for an answer that no agent gave."""
    run = meta.get("agent")
    if not isinstance(run, Mapping):
        return {}
    reason = str(run["stop_reason"])
    scores = {STEPS: float(run["steps"]), LOOP_ABORTED: float(reason in LOOPS)}
    scores |= {f"agent/tool_calls/{tool}": float(count) for tool, count in run["tool_calls"].items()}
    scores |= {f"agent/stop_reason/{ending}": float(reason == ending) for ending in {*ENDINGS, reason}}
    scores |= {f"agent/answered_by/{who}": float(run["answered_by"] == who) for who in (BY_MODEL, BY_FLOOR, BY_NONE)}
    return scores


def tools_chosen(meta: Mapping[str, Any]) -> list[str]:
    """The tools an agent called, in the order of their first call (final_answer, which only ends it, left out)."""
    return list(dict.fromkeys(tool for tool in meta["agent"]["tools"] if tool != FINAL_ANSWER))


def tool_choice_scores(meta: Mapping[str, Any], expected: Sequence[str]) -> dict[str, float]:
    """`agent/tool_choice_correct`: it called exactly the expected tools; `agent/tool_sequence_correct`: and first
    called them in the expected order. Nothing without an agent's run or an expectation."""
    if not expected or not isinstance(meta.get("agent"), Mapping):
        return {}
    chosen = tools_chosen(meta)
    return {TOOL_CHOICE_CORRECT: float(set(chosen) == set(expected)),
            TOOL_SEQUENCE_CORRECT: float(chosen == list(dict.fromkeys(expected)))}


def agent_failure(meta: Mapping[str, Any], expected: Sequence[str]) -> str | None:
    """Why the agent itself failed a question (the diagnosis' agent layer), or None: it looped, ran out of budget,
    never called a tool, or called other tools than the question needs."""
    run = meta.get("agent")
    if not isinstance(run, Mapping):
        return None
    reason = str(run["stop_reason"])
    if reason in LOOPS:
        return f"loop ({reason})"
    if reason in BUDGETS:
        return f"budget ({reason})"
    if reason == "text":
        return "no tool call"
    chosen = tools_chosen(meta)
    if expected and set(chosen) != set(expected):
        return f"wrong tools: called {chosen or 'none'}, needed {list(expected)}"
    return None


def agent_summary(per_question: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """The run's means: steps per question, calls per question of each tool, the share of each ending and of what
    answered, and the number of runs aborted in a loop."""
    names = sorted({name for scores in per_question for name in scores if name.startswith("agent/")})
    if not names:
        return {}

    def mean(name: str) -> float:
        return float(np.mean([scores.get(name, 0.0) for scores in per_question if STEPS in scores]))

    metrics = {STEPS_PER_QUESTION: mean(STEPS),
               LOOP_ABORTS: float(sum(s.get(LOOP_ABORTED, 0.0) for s in per_question))}
    shares = ("agent/tool_calls/", "agent/stop_reason/", "agent/answered_by/")
    metrics |= {name: mean(name) for name in names if name.startswith(shares)}
    for correct, accuracy in ((TOOL_CHOICE_CORRECT, TOOL_CHOICE_ACCURACY),
                              (TOOL_SEQUENCE_CORRECT, TOOL_SEQUENCE_ACCURACY)):
        judged = [scores[correct] for scores in per_question if correct in scores]
        if judged:
            metrics[accuracy] = float(np.mean(judged))
    return metrics
