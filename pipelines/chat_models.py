"""The chat model behind every JSON-answering LLM slot (rewriters, expanders, sequential decomposition, LLMRanker).

One config serves a local GGUF and an OpenAI-compatible endpoint, so a slot switches between them by its
`endpoint` key alone (models=openai_compatible sets it) and the schema is written once. Locally llama.cpp turns
the schema into a grammar, so even SmolLM2-135M replies parseably; online the schema travels in `response_format`
in the form the server understands (`schema_format`), and the slot's own fallback handles a reply that ignores it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from components.common.response_formats import SCHEMA_FORMATS
from pipelines.models import resolve_model


def json_chat_generator(
    model: str,
    schema: dict[str, Any],
    max_tokens: int = 64,
    endpoint: Mapping[str, Any] | None = None,
    n_ctx: int = 8192,
    seed: int = 42,
) -> Any:
    """A greedy chat generator whose replies are held to `schema`.

    `model` is a local reference (pkg:..., a .gguf file) when `endpoint` is None, else the endpoint's model name.
    `endpoint` has `base_url`, `api_key_env`, `timeout`, `max_retries` and `schema_format` (SCHEMA_FORMATS).
    """
    generation: dict[str, Any] = {"max_tokens": max_tokens, "temperature": 0.0}
    if endpoint is None:
        from haystack_integrations.components.generators.llama_cpp import LlamaCppChatGenerator

        return LlamaCppChatGenerator(
            model=resolve_model(model),
            n_ctx=n_ctx,
            n_batch=512,
            model_kwargs={"verbose": False, "seed": seed},
            generation_kwargs={**generation, "response_format": SCHEMA_FORMATS["json_object_schema"](schema)},
        )
    from haystack.components.generators.chat import OpenAIChatGenerator
    from haystack.utils import Secret

    schema_format = endpoint.get("schema_format", "json_schema")
    if schema_format not in SCHEMA_FORMATS:
        raise ValueError(f"endpoint.schema_format must be one of {sorted(SCHEMA_FORMATS)}, got {schema_format!r}")
    return OpenAIChatGenerator(
        model=model,
        api_base_url=endpoint["base_url"],
        api_key=Secret.from_env_var(endpoint["api_key_env"]),
        timeout=endpoint.get("timeout"),
        max_retries=endpoint.get("max_retries"),
        generation_kwargs={**generation, "seed": seed, "response_format": SCHEMA_FORMATS[schema_format](schema)},
    )
