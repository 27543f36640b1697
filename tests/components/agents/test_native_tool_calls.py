"""NativeToolCalls' control flow on a recording generator; the real round trip (llama.cpp's OpenAI-compatible
server answering the forced call natively, then reading the history) is
tests/test_run.py::test_the_agent_calls_tools_natively_on_the_endpoint."""

from haystack import component
from haystack.components.generators.chat import OpenAIChatGenerator
from haystack.dataclasses import ChatMessage, ToolCall
from haystack.utils import Secret

from components.agents.native_tool_calls import NativeToolCalls
from pipelines.agent_tools import final_answer_tool


@component
class Recording:
    def __init__(self) -> None:
        self.kwargs: list[dict] = []
        self.sent: list[list[dict]] = []

    @component.output_types(replies=list[ChatMessage])
    def run(self, messages, streaming_callback=None, generation_kwargs=None, tools=None):
        self.kwargs.append(dict(generation_kwargs or {}))
        self.sent.append([m.to_openai_dict_format() for m in messages])
        return {"replies": [ChatMessage.from_assistant("ok")]}


def test_only_the_first_step_is_held_to_the_tool():
    inner = Recording()
    generator = NativeToolCalls(inner, first_tool="kb_search")
    question = [ChatMessage.from_user("How many leave days?")]
    call = ToolCall(tool_name="kb_search", arguments={"query": "leave days"}, id="call-1")
    later = [*question, ChatMessage.from_assistant(tool_calls=[call]),
             ChatMessage.from_tool(tool_result="20 days", origin=call)]
    tools = [final_answer_tool()]
    generator.run(messages=question, generation_kwargs={"temperature": 0.0}, tools=tools)
    generator.run(messages=later, generation_kwargs={"temperature": 0.0}, tools=tools)
    generator.run(messages=question)  # without tools there is nothing to choose
    assert inner.kwargs == [
        {"temperature": 0.0, "tool_choice": {"type": "function", "function": {"name": "kb_search"}}},
        {"temperature": 0.0},
        {},
    ]
    assert inner.sent[1][1] == {"role": "assistant", "content": "", "tool_calls": [  # content: llama.cpp's server
        {"type": "function", "function": {"name": "kb_search", "arguments": '{"query": "leave days"}'}, "id": "call-1"}]}
    assert inner.sent[1][2]["role"] == "tool" and inner.sent[1][0] == {"role": "user", "content": "How many leave days?"}


def test_without_a_first_tool_every_step_is_left_to_the_model():
    inner = Recording()
    NativeToolCalls(inner).run(messages=[ChatMessage.from_user("q")], tools=[final_answer_tool()])
    assert inner.kwargs == [{}]


def test_to_dict_and_back():
    inner = OpenAIChatGenerator(api_key=Secret.from_env_var("HOME"), model="smollm2", api_base_url="http://127.0.0.1:1/v1")
    data = NativeToolCalls(inner, first_tool="kb_search").to_dict()
    assert data == {
        "type": "components.agents.native_tool_calls.NativeToolCalls",
        "init_parameters": {"chat_generator": inner.to_dict(), "first_tool": "kb_search"},
    }
    restored = NativeToolCalls.from_dict(data)
    assert restored.first_tool == "kb_search" and restored.chat_generator.to_dict() == inner.to_dict()
