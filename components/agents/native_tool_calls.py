"""A chat generator that calls tools itself (an OpenAI-compatible endpoint), adapted to Haystack's Agent."""

from __future__ import annotations

from typing import Any

from haystack import component, default_to_dict
from haystack.core.serialization import component_to_dict
from haystack.dataclasses import ChatMessage

from components.agents.wrapped_chat_generator import Tools, WrappedChatGenerator, is_first_step


@component
class NativeToolCalls(WrappedChatGenerator):
    """
    Wraps a chat generator that calls tools itself (OpenAIChatGenerator on an OpenAI-compatible endpoint) for an
    Agent's loop. Earlier tool calls are sent with an empty `content`, which OpenAI allows to be left out but some
    servers require (llama.cpp's fails on the second step without it). With `first_tool`, the first step must call
    that tool (OpenAI's `tool_choice` names it) and every later step is left to the model: a small model otherwise
    tends to answer from nothing. JsonToolChatGenerator does the same for models without tool calls.

    ### Usage example
    ```python
    generator = NativeToolCalls(OpenAIChatGenerator(api_base_url=url, model="smollm2"), first_tool="kb_search")
    agent = Agent(chat_generator=generator, tools=[kb_search, final_answer], exit_conditions=["final_answer"])
    ```
    """

    def __init__(self, chat_generator: Any, first_tool: str | None = None) -> None:
        """
        :param chat_generator: A chat generator whose `generation_kwargs` reach OpenAI's chat completions API.
        :param first_tool: The tool the first step must call; None: the model chooses from the start.
        """
        self.chat_generator = chat_generator
        self.first_tool = first_tool

    def _reply(
        self, messages: list[ChatMessage], streaming_callback: Any, kwargs: dict[str, Any], tools: Tools
    ) -> dict[str, list[ChatMessage]]:
        """The chat generator's `replies`; on the first step (no tool call in `messages` yet) `kwargs` gain a
        `tool_choice` naming `first_tool`."""
        if self.first_tool is not None and tools and is_first_step(messages):
            kwargs["tool_choice"] = {"type": "function", "function": {"name": self.first_tool}}
        sent = [_with_content(message) for message in messages]
        return self.chat_generator.run(
            messages=sent, streaming_callback=streaming_callback, generation_kwargs=kwargs, tools=tools
        )

    def to_dict(self) -> dict[str, Any]:
        return default_to_dict(
            self, chat_generator=component_to_dict(self.chat_generator, "chat_generator"), first_tool=self.first_tool
        )


def _with_content(message: ChatMessage) -> ChatMessage:
    """A tool call without text gets an empty one, so that its OpenAI form carries `content`."""
    if not message.tool_calls or message.text is not None:
        return message
    return ChatMessage.from_assistant("", tool_calls=message.tool_calls, meta=message.meta)
