"""What the agent's chat-generator wrappers (JsonToolChatGenerator, NativeToolCalls) share."""

from __future__ import annotations

from typing import Any, Self

from haystack import component, default_from_dict
from haystack.core.serialization import component_from_dict, import_class_by_name
from haystack.dataclasses import ChatMessage
from haystack.tools import Tool, Toolset

from components.agents.agent_answer import FLOOR_SEARCH

Tools = list[Tool] | Toolset | None


def is_first_step(messages: list[ChatMessage]) -> bool:
    """The model has called no tool yet in this conversation (the floor search was made for it, not by it)."""
    return not any(message.tool_calls for message in messages if not message.meta.get(FLOOR_SEARCH))


class WrappedChatGenerator:
    """A chat generator for Haystack's `Agent` that wraps another (`chat_generator`) and changes what it is sent:
    the Agent calls `run` as it calls any chat generator's, and each wrapper writes `_reply`. A subclass is made a
    component by `@component` and writes its own `__init__` and `to_dict`."""

    chat_generator: Any

    def warm_up(self) -> None:
        if hasattr(self.chat_generator, "warm_up"):
            self.chat_generator.warm_up()

    @component.output_types(replies=list[ChatMessage])
    def run(
        self,
        messages: list[ChatMessage],
        streaming_callback: Any = None,
        *,
        generation_kwargs: dict[str, Any] | None = None,
        tools: Tools = None,
    ) -> dict[str, list[ChatMessage]]:
        """
        :param messages: The conversation so far, tool calls and results included.
        :param streaming_callback: For the wrapped chat generator, where the wrapper streams.
        :param generation_kwargs: Passed to the wrapped chat generator, with what the wrapper adds.
        :param tools: The tools the reply may call.
        :returns: `replies`, as a chat generator's.
        """
        return self._reply(messages, streaming_callback, dict(generation_kwargs or {}), tools)

    def _reply(
        self, messages: list[ChatMessage], streaming_callback: Any, kwargs: dict[str, Any], tools: Tools
    ) -> dict[str, list[ChatMessage]]:
        """`run`'s work, with `kwargs` a copy of its `generation_kwargs` the wrapper may change."""
        raise NotImplementedError

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        """A wrapper rebuilt from `to_dict`, its `chat_generator` rebuilt from its own serialised form."""
        parameters = dict(data["init_parameters"])
        inner = parameters["chat_generator"]
        parameters["chat_generator"] = component_from_dict(
            import_class_by_name(inner["type"]), inner, "chat_generator"
        )
        return default_from_dict(cls, {**data, "init_parameters": parameters})
