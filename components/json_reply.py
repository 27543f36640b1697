"""One JSON-object reply from a chat generator, or None: what the query-side LLM components share."""

from __future__ import annotations

import json
from typing import Any

from haystack import logging
from haystack.dataclasses import ChatMessage

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
