"""The agent's floor: before the model chooses anything, its first search is the user's question verbatim through
the retrieval kb_search wraps, so what the agent retrieves is never less than what that retrieval does."""

from __future__ import annotations

from typing import Any

from haystack import default_to_dict
from haystack.components.agents.state.state import State
from haystack.dataclasses import ChatMessage, ChatRole, ToolCall
from haystack.tools import Tool, deserialize_tools_or_toolset_inplace, warm_up_tools

from components.agents.agent_answer import FLOOR_SEARCH
from pipelines.haystack_compat import run_tool


class FloorSearchHook:
    """
    A `before_run` hook for Haystack's `Agent`: it calls `tool` with the user's question verbatim as its `query`,
    through the Agent's own tool execution, so the request's scope reaches it from the Agent's state exactly as it
    reaches the model's searches, and the tool's `outputs_to_state` fill the state. The call and its result join the
    conversation as an assistant tool call and its tool message, so the model reads them, and cites from them, as a
    search of its own; the call's message is marked `floor_search` because the model did not make it.

    ### Usage example
    ```python
    floor = FloorSearchHook(tool=kb_search_tool(search, "window.documents", description, "fusion.documents"))
    agent = Agent(chat_generator=generator, tools=[kb_search, final_answer], state_schema=STATE_SCHEMA,
                  hooks={"before_run": [floor]})
    ```
    """

    allowed_hook_points = ("before_run",)

    def __init__(self, tool: Tool) -> None:
        """:param tool: The search, taking the question as `query`; any state input it has is the Agent's."""
        if "query" not in tool.parameters.get("properties", {}):
            raise ValueError(
                f"FloorSearchHook: tool '{tool.name}' takes no `query` to search the question with"
            )
        self.tool = tool

    def warm_up(self) -> None:
        warm_up_tools([self.tool])

    def run(self, state: State) -> None:
        messages = state.get("messages") or []
        question = next((m.text for m in reversed(messages) if m.is_from(ChatRole.USER) and m.text), None)
        if question is None:
            raise ValueError(
                "FloorSearchHook: the conversation has no user message whose question it could search"
            )
        search = ToolCall(tool_name=self.tool.name, arguments={"query": question}, id=FLOOR_SEARCH)
        call = ChatMessage.from_assistant(tool_calls=[search], meta={FLOOR_SEARCH: True})
        # a failing search comes back as an error observation, as the Agent's own calls do (it does not raise)
        results, _ = run_tool(messages=[call], state=state, tools=[self.tool], raise_on_failure=False)
        state.set("messages", [call, *results])

    def to_dict(self) -> dict[str, Any]:
        return default_to_dict(self, tool=self.tool.to_dict())

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FloorSearchHook:
        parameters = {"tools": [data["init_parameters"]["tool"]]}
        deserialize_tools_or_toolset_inplace(parameters)
        (tool,) = parameters["tools"]
        return cls(tool=tool)
