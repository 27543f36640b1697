"""Tool calls from a chat model that has no tool-calling of its own, held to a JSON schema so every step parses."""

from __future__ import annotations

import json
from typing import Any

from haystack import component, default_to_dict
from haystack.core.serialization import component_to_dict
from haystack.dataclasses import ChatMessage, ChatRole, ToolCall
from haystack.tools import Tool, flatten_tools_or_toolsets

from components.agents.wrapped_chat_generator import Tools, WrappedChatGenerator, is_first_step
from components.common.response_formats import SCHEMA_FORMATS

# llama-cpp-python's error when a prompt and its max_tokens exceed n_ctx: the run ends as cut off, not as a crash.
CONTEXT_FULL = "exceed context window"
TOOLS_PROMPT = (
    "You act only by calling one tool per reply, as JSON: {{\"tool\": NAME, \"arguments\": {{...}}}}. "
    "Tool results come back as observations. Tools:\n{tools}"
)


@component
class JsonToolChatGenerator(WrappedChatGenerator):
    """
    Lets Haystack's `Agent` drive a chat model without native tool calls, such as SmolLM2 through llama.cpp.

    Each reply is held to a JSON schema: one of the tools, by name, with that tool's argument schema. llama.cpp
    turns the schema into a grammar, so even a 135M model replies with a call that parses and names a real tool;
    an endpoint gets the schema in `response_format`. The tools are listed in a system message, earlier calls and
    their results are replayed as plain turns, and the reply comes back as a `ToolCall`, so the Agent's loop, exit
    conditions, hooks and traces work as with a native tool-calling model.

    ### Usage example
    ```python
    generator = JsonToolChatGenerator(chat_generator=LlamaCppChatGenerator(model=path, n_ctx=4096))
    agent = Agent(chat_generator=generator, tools=[sql_tool, final_answer], exit_conditions=["final_answer"])
    ```
    """

    def __init__(
        self,
        chat_generator: Any,
        schema_format: str = "json_object_schema",
        max_argument_chars: int = 120,
        max_argument_items: int = 3,
        generation_kwargs: dict[str, Any] | None = None,
        first_tool: str | None = None,
    ) -> None:
        """
        :param chat_generator: The chat generator that writes each call (LlamaCppChatGenerator, OpenAIChatGenerator).
        :param schema_format: How it takes the schema: json_object_schema (llama.cpp) | json_schema (OpenAI and
            most servers) | json_object (JSON mode only).
        :param max_argument_chars: The longest text argument the schema allows, so that a call ends within the
            chat generator's max_tokens instead of being cut off unparsed.
        :param max_argument_items: The longest list argument the schema allows (e.g. citations), for the same reason.
        :param generation_kwargs: Merged into every call's (e.g. a larger `max_tokens` for a call than for an answer).
        :param first_tool: The only tool the first step may call (e.g. a search, so that a small model does not
            answer from nothing); None: any tool.
        """
        if schema_format not in SCHEMA_FORMATS:
            raise ValueError(f"schema_format must be one of {sorted(SCHEMA_FORMATS)}, got {schema_format!r}")
        if max_argument_chars < 1 or max_argument_items < 1:
            raise ValueError(f"max_argument_chars and max_argument_items must be >= 1, got {max_argument_chars} "
                             f"and {max_argument_items}")
        self.chat_generator = chat_generator
        self.schema_format = schema_format
        self.max_argument_chars = max_argument_chars
        self.max_argument_items = max_argument_items
        self.generation_kwargs = dict(generation_kwargs or {})
        self.first_tool = first_tool

    def _reply(
        self, messages: list[ChatMessage], streaming_callback: Any, kwargs: dict[str, Any], tools: Tools
    ) -> dict[str, list[ChatMessage]]:
        """One assistant message holding a tool call, held to the tools' schema (sent as `response_format`), or
        its text when it did not parse; without tools the chat generator answers as it is. Nothing streams: a call
        is parsed whole."""
        flat = flatten_tools_or_toolsets(tools) if tools else []
        merged = {**self.generation_kwargs, **kwargs}
        if not flat:
            return self.chat_generator.run(messages=messages, generation_kwargs=merged)
        if self.first_tool is not None and is_first_step(messages):
            flat = [t for t in flat if t.name == self.first_tool] or flat
        schema = tool_call_schema(flat, self.max_argument_chars, self.max_argument_items)
        held = {**merged, "response_format": SCHEMA_FORMATS[self.schema_format](schema)}
        prompt = [ChatMessage.from_system(TOOLS_PROMPT.format(tools=_tool_lines(flat))), *_as_plain_turns(messages)]
        try:
            (reply,) = self.chat_generator.run(messages=prompt, generation_kwargs=held)["replies"]
        except ValueError as e:  # llama.cpp: the conversation and max_tokens no longer fit in n_ctx
            if CONTEXT_FULL not in str(e):
                raise
            return {"replies": [ChatMessage.from_assistant("", meta={"finish_reason": "length", "context_full": True})]}
        return {"replies": [_as_tool_call(reply, {t.name for t in flat})]}

    def to_dict(self) -> dict[str, Any]:
        return default_to_dict(
            self, chat_generator=component_to_dict(self.chat_generator, "chat_generator"),
            schema_format=self.schema_format, max_argument_chars=self.max_argument_chars,
            max_argument_items=self.max_argument_items,
            generation_kwargs=self.generation_kwargs, first_tool=self.first_tool,
        )


def tool_call_schema(tools: list[Tool], max_chars: int, max_items: int) -> dict[str, Any]:
    """One of the tools by name, with its own arguments' schema, each text at most `max_chars` long and each list
    at most `max_items` long."""
    return {
        "anyOf": [
            {
                "type": "object",
                "properties": {"tool": {"const": t.name}, "arguments": _bounded(t.parameters, max_chars, max_items)},
                "required": ["tool", "arguments"],
            }
            for t in tools
        ]
    }


def _bounded(schema: Any, max_chars: int, max_items: int) -> Any:
    if isinstance(schema, list):
        return [_bounded(item, max_chars, max_items) for item in schema]
    if not isinstance(schema, dict):
        return schema
    bounded = {key: _bounded(value, max_chars, max_items) for key, value in schema.items()}
    if bounded.get("type") == "string":
        bounded.setdefault("maxLength", max_chars)
    if bounded.get("type") == "array":
        bounded.setdefault("maxItems", max_items)
    return bounded


def _tool_lines(tools: list[Tool]) -> str:
    return "\n".join(
        f"- {t.name}: {t.description} Arguments: {json.dumps(t.parameters.get('properties', {}), ensure_ascii=False)}"
        for t in tools
    )


def _as_plain_turns(messages: list[ChatMessage]) -> list[ChatMessage]:
    """Earlier calls as the JSON the model wrote, and their results as user turns, for chat templates without a
    tool role."""
    turns = []
    for message in messages:
        if message.tool_calls:
            call = message.tool_calls[0]
            turns.append(ChatMessage.from_assistant(json.dumps({"tool": call.tool_name, "arguments": call.arguments},
                                                               ensure_ascii=False)))
        elif message.tool_call_results:
            result = message.tool_call_results[0]
            status = "error" if result.error else "result"
            turns.append(ChatMessage.from_user(f"Observation ({result.origin.tool_name} {status}):\n{result.result}"))
        elif message.is_from(ChatRole.SYSTEM):
            turns.append(ChatMessage.from_system(message.text or ""))
        else:
            turns.append(message)
    return turns


def _as_tool_call(reply: ChatMessage, names: set[str]) -> ChatMessage:
    try:
        call = json.loads(reply.text or "")
        name, arguments = call["tool"], call["arguments"]
    except (json.JSONDecodeError, KeyError, TypeError):
        return ChatMessage.from_assistant(reply.text or "", meta={**reply.meta, "tool_call_parsed": False})
    if name not in names or not isinstance(arguments, dict):
        return ChatMessage.from_assistant(reply.text or "", meta={**reply.meta, "tool_call_parsed": False})
    return ChatMessage.from_assistant(tool_calls=[ToolCall(tool_name=name, arguments=arguments)], meta=reply.meta)
