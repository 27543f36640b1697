"""Stops an agent that asks for the same tool call again: a small model in a loop repeats itself, and a read-only
tool gives the same answer twice."""

from __future__ import annotations

import json
import unicodedata
from typing import Any

from haystack import default_from_dict, default_to_dict
from haystack.components.agents.state.state import State

from components.agents.agent_answer import FLOOR_SEARCH

STOP_REASON = "repeated_call"


class RepeatedCallHook:
    """
    A `before_tool` hook for Haystack's `Agent`: when the pending call repeats an earlier one of the model's (same
    tool, same arguments once normalised: Unicode NFKC, case, whitespace, key order), it sets the Agent's
    `stop_run` to `repeated_call`, so the run ends before the next model call with that exit reason. The floor
    search, made for the model (`floor_search` in its message's meta), is not the model's: searching the question
    once more is not yet a loop.

    ### Usage example
    ```python
    agent = Agent(chat_generator=generator, tools=tools, hooks={"before_tool": [RepeatedCallHook()]})
    ```
    """

    allowed_hook_points = ("before_tool",)

    def run(self, state: State) -> None:
        messages = state.get("messages") or []
        calls = [call for message in messages if not message.meta.get(FLOOR_SEARCH) for call in message.tool_calls]
        if not calls:
            return
        *earlier, pending = [normalised_call(c.tool_name, c.arguments) for c in calls]
        if pending in earlier:
            state.set("stop_run", STOP_REASON)

    def to_dict(self) -> dict[str, Any]:
        return default_to_dict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RepeatedCallHook:
        return default_from_dict(cls, data)


def normalised_call(tool: str, arguments: dict[str, Any]) -> str:
    """One text per call that differs only in form: `SELECT  x` and ` select x` are the same call."""
    return f"{tool}:{json.dumps(_normalised(arguments), sort_keys=True, ensure_ascii=False)}"


def _normalised(value: Any) -> Any:
    if isinstance(value, str):
        return " ".join(unicodedata.normalize("NFKC", value).casefold().split())
    if isinstance(value, dict):
        return {key: _normalised(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_normalised(item) for item in value]
    return value
