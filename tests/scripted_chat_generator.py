"""A chat generator with a scripted reply, for control-flow tests of cost tracing only.

Backed by tests/test_run.py::test_generating_job_logs_all_three_layers_cost_and_a_diagnosis, which counts the
calls and tokens of the real LlamaCppChatGenerator through the same tracing.
"""

from haystack import component
from haystack.dataclasses import ChatMessage


@component
class ScriptedChatGenerator:
    def __init__(self, reply: str, prompt_tokens: int = 11, completion_tokens: int = 5) -> None:
        self.reply = reply
        self.usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}

    @component.output_types(replies=list[ChatMessage])
    def run(self, messages: list[ChatMessage]) -> dict[str, list[ChatMessage]]:
        return {"replies": [ChatMessage.from_assistant(self.reply, meta={"usage": dict(self.usage)})]}
