"""What an agent did per question (pipeline=agentic): its steps, tool calls and why it stopped, read from the
answer's `agent` meta (components/agents/agent_answer.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from components.agents.agent_answer import FINAL_ANSWER, STOP_REASONS

# Every way a run can end, so that each question scores 0 or 1 on each and the means are rates.
ENDINGS = (FINAL_ANSWER, *STOP_REASONS)
# Endings that mean the agent went round in circles.
LOOPS = ("repeated_call", "max_agent_steps")


def agent_scores(meta: Mapping[str, Any]) -> dict[str, float]:
    """Per question: `agent/steps`, `agent/tool_calls/<tool>`, `agent/stop_reason/<ending>` (0 or 1) and
    `agent/loop_aborted`; nothing for an answer that no agent gave."""
    run = meta.get("agent")
    if not isinstance(run, Mapping):
        return {}
    reason = str(run["stop_reason"])
    scores = {"agent/steps": float(run["steps"]), "agent/loop_aborted": float(reason in LOOPS)}
    scores |= {f"agent/tool_calls/{tool}": float(count) for tool, count in run["tool_calls"].items()}
    scores |= {f"agent/stop_reason/{ending}": float(reason == ending) for ending in {*ENDINGS, reason}}
    return scores


def agent_summary(per_question: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """The run's means: steps per question, calls per question of each tool, the share of each ending, and the
    number of runs aborted in a loop."""
    names = sorted({name for scores in per_question for name in scores if name.startswith("agent/")})
    if not names:
        return {}

    def mean(name: str) -> float:
        return float(np.mean([scores.get(name, 0.0) for scores in per_question if "agent/steps" in scores]))

    metrics = {"agent/steps_per_question": mean("agent/steps"),
               "agent/loop_aborts": float(sum(s.get("agent/loop_aborted", 0.0) for s in per_question))}
    metrics |= {name: mean(name) for name in names if name.startswith(("agent/tool_calls/", "agent/stop_reason/"))}
    return metrics
