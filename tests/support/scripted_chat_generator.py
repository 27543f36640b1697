"""A chat generator with scripted replies, for control-flow tests (cost tracing, the self-check loop) only.

Backed by tests/test_run.py::test_generating_job_logs_all_three_layers_cost_and_a_diagnosis, which counts the
calls and tokens of the real LlamaCppChatGenerator through the same tracing, and by the real-model self-check
run in the same file.
"""

from haystack import component
from haystack.dataclasses import ChatMessage


@component
class ScriptedChatGenerator:
    """Replies `first` in turn, then `reply` on every later call; `calls` counts the calls."""

    def __init__(self, reply: str, prompt_tokens: int = 11, completion_tokens: int = 5, first: list[str] | None = None) -> None:
        self.reply = reply
        self.first = list(first or [])
        self.usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}
        self.calls = 0

    @component.output_types(replies=list[ChatMessage])
    def run(self, messages: list[ChatMessage]) -> dict[str, list[ChatMessage]]:
        text = self.first[self.calls] if self.calls < len(self.first) else self.reply
        self.calls += 1
        return {"replies": [ChatMessage.from_assistant(text, meta={"usage": dict(self.usage)})]}
