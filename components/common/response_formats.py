"""How each kind of chat server takes a JSON schema in `response_format` (llama.cpp locally makes it a grammar)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

SCHEMA_FORMATS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    # OpenAI, vLLM, SGLang, Ollama >= 0.5, llama.cpp's own server: the OpenAI structured-output form.
    "json_schema": lambda schema: {"type": "json_schema", "json_schema": {"name": "reply", "schema": schema}},
    # llama-cpp-python (in process, and its server) and Anyscale: JSON mode with the schema beside it.
    "json_object_schema": lambda schema: {"type": "json_object", "schema": schema},
    # JSON mode only (DeepSeek): the prompt's example is the only guide to the shape.
    "json_object": lambda schema: {"type": "json_object"},
}
