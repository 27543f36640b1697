"""One JSON-object reply from a chat generator, or None: what the query-side LLM components share."""

from __future__ import annotations

import json
from typing import Any

from haystack import logging
from haystack.dataclasses import ChatMessage
from haystack.utils import deserialize_chatgenerator_inplace

logger = logging.getLogger(__name__)


def ask_json(chat_generator: Any, prompt: str, caller: str) -> dict[str, Any] | None:
    """Sends `prompt` as one user message and parses the first reply as a JSON object.

    A generator error (an endpoint down or timing out) or a reply that is not a JSON object gives None and a
    warning naming `caller`, so the caller falls back instead of stopping the run.
    """
    try:
        replies = chat_generator.run(messages=[ChatMessage.from_user(prompt)])["replies"]
    except Exception as error:
        logger.warning("{caller}: the generator failed ({error}); falling back", caller=caller, error=error)
        return None
    reply = replies[0].text if replies else None
    try:
        parsed = json.loads(reply or "", strict=False)  # small models put raw newlines inside strings
    except json.JSONDecodeError:
        parsed = None
    if not isinstance(parsed, dict):
        logger.warning("{caller}: unusable reply {reply!r}; falling back", caller=caller, reply=reply)
        return None
    return parsed


class HoldsChatGenerator:
    """Warm-up and deserialisation for a component whose `chat_generator` init parameter is a Haystack component."""

    chat_generator: Any

    def warm_up(self) -> None:
        """Loads the generator's model."""
        if hasattr(self.chat_generator, "warm_up"):
            self.chat_generator.warm_up()

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Any:
        """Deserialise the component, rebuilding the generator from its type."""
        params = dict(data["init_parameters"])
        deserialize_chatgenerator_inplace(params)
        return cls(**params)
