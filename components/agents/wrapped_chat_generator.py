"""What the agent's chat-generator wrappers (JsonToolChatGenerator, NativeToolCalls) share."""

from __future__ import annotations

from typing import Any

from haystack import default_from_dict
from haystack.core.serialization import component_from_dict, import_class_by_name
from haystack.dataclasses import ChatMessage


def is_first_step(messages: list[ChatMessage]) -> bool:
    """No tool has been called yet in this conversation."""
    return not any(message.tool_calls for message in messages)


def wrapper_from_dict(cls: type, data: dict[str, Any]) -> Any:
    """A wrapper rebuilt from `to_dict`, its `chat_generator` rebuilt from its own serialised form."""
    parameters = dict(data["init_parameters"])
    inner = parameters["chat_generator"]
    parameters["chat_generator"] = component_from_dict(import_class_by_name(inner["type"]), inner, "chat_generator")
    return default_from_dict(cls, {**data, "init_parameters": parameters})
