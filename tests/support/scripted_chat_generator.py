"""A chat generator with scripted replies, for control-flow tests (cost tracing, the self-check loop, agent
safeguards and scoping) only.

Backed by tests/test_run.py::test_generating_job_logs_all_three_layers_cost_and_a_diagnosis, which counts the
calls and tokens of the real LlamaCppChatGenerator through the same tracing, by the real-model self-check run in
the same file, and by the agent runs on real SmolLM2 in tests/components/agents.
"""

from typing import Any

from haystack import component
from haystack.dataclasses import ChatMessage, ToolCall


def call(tool: str, **arguments: Any) -> ChatMessage:
    """A scripted tool call."""
    return ChatMessage.from_assistant(tool_calls=[ToolCall(tool_name=tool, arguments=arguments)])


@component
class ScriptedChatGenerator:
    """Replies `first` in turn (texts or whole messages, such as tool calls), then `reply` on every later call;
    `calls` counts the calls."""

    def __init__(
        self, reply: str, prompt_tokens: int = 11, completion_tokens: int = 5, first: list[str | ChatMessage] | None = None
    ) -> None:
        self.reply = reply
        self.first = list(first or [])
        self.usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}
        self.calls = 0

    @component.output_types(replies=list[ChatMessage])
    def run(
        self, messages: list[ChatMessage], tools: Any = None, generation_kwargs: Any = None
    ) -> dict[str, list[ChatMessage]]:
        scripted = self.first[self.calls] if self.calls < len(self.first) else self.reply
        self.calls += 1
        if isinstance(scripted, ChatMessage):
            return {"replies": [ChatMessage.from_assistant(
                scripted.text, tool_calls=scripted.tool_calls, meta={"usage": dict(self.usage)})]}
        return {"replies": [ChatMessage.from_assistant(scripted, meta={"usage": dict(self.usage)})]}
