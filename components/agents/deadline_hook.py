"""Ends an agent's run once it has taken longer than its wall-clock budget, before the next model call."""

from __future__ import annotations

import time
from typing import Any

from haystack import default_from_dict, default_to_dict
from haystack.components.agents.state.state import State

STOP_REASON = "timeout"
# The Agent state key holding the run's deadline (time.monotonic() seconds); declare it in the state_schema.
DEADLINE_KEY = "deadline"


class DeadlineHook:
    """
    A hook for Haystack's `Agent`, registered at `before_run` (it sets the deadline) and `before_llm` (it checks it).
    Past the deadline it sets `stop_run` to `timeout`; a model call or a tool already running is not cut short.

    The Agent's `state_schema` must declare `deadline: {"type": float}`.

    ### Usage example
    ```python
    deadline = DeadlineHook(seconds=60)
    agent = Agent(chat_generator=generator, tools=tools, state_schema={"deadline": {"type": float}},
                  hooks={"before_run": [deadline], "before_llm": [deadline]})
    ```
    """

    allowed_hook_points = ("before_run", "before_llm")

    def __init__(self, seconds: float) -> None:
        if seconds <= 0:
            raise ValueError(f"seconds must be > 0, got {seconds}")
        self.seconds = seconds

    def run(self, state: State) -> None:
        deadline = state.get(DEADLINE_KEY)
        if deadline is None:
            state.set(DEADLINE_KEY, time.monotonic() + self.seconds)
        elif time.monotonic() > deadline:
            state.set("stop_run", STOP_REASON)

    def to_dict(self) -> dict[str, Any]:
        return default_to_dict(self, seconds=self.seconds)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DeadlineHook:
        return default_from_dict(cls, data)
