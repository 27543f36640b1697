"""What serve.py answers, as Pydantic models: `/openapi.json` publishes them, and a reply that strays from them
fails in the server, not in a client."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class DocumentRef(BaseModel):
    chunk_id: str
    doc_id: str | None = None
    score: float | None = None


class Citation(BaseModel):
    """A context chunk the answer cites (components/answer/citation_verifier.py), with a snippet of its text."""

    model_config = ConfigDict(extra="allow")
    marker: int | None = None
    chunk_id: str
    doc_id: str | None = None
    start: int | None = None
    end: int | None = None
    snippet: str = ""


class AgentStep(BaseModel):
    """One tool call of an agent (pipeline=agentic) and what it returned, streamed as /query's `step` event."""

    tool: str
    arguments: dict[str, Any]
    error: bool
    # The start of what the tool returned to the agent: passages the caller may see, table rows, or a refusal.
    observation: str


class AgentSummary(BaseModel):
    """How an agent reached its reply: model calls, the tools it called in order, why it stopped, and what gave the
    answer: `model` (its final_answer), `floor` (the answer stage on the run's context) or `none` (a refusal)."""

    steps: int
    tools: list[str]
    tool_calls: dict[str, int]
    stop_reason: str
    answered_by: str


class QueryReply(BaseModel):
    """A question's reply: what the run's per_question.jsonl records for it, and how it was served."""

    answer: str | None
    refused: bool
    citations: list[Citation]
    unsupported_sentences: list[str] = []
    documents: list[DocumentRef]
    route: str | None = None
    crag_label: str | None = None
    agent: AgentSummary | None = None
    # serve.debug=true: the chunk and doc ids at every stage.
    stages: dict[str, list[DocumentRef]] | None = None
    stages_ms: dict[str, float]
    trace_id: str
    # The served alias that answered (serve.variants), and its registered version ("" for a run served directly).
    variant: str
    model_version: str
    # Served from the answer cache (serve.cache): no pipeline ran, so `stages_ms` is empty.
    cached: bool = False
    # The retrieval paths dropped for this request because they failed or timed out (retriever.paths); the reply
    # was built from the others. Empty when every path answered (or the pipeline has one path).
    degraded: list[str] = []


class ChatMessageOut(BaseModel):
    role: str
    content: str


class ChatChoice(BaseModel):
    index: int
    finish_reason: str
    message: ChatMessageOut


class ChatCompletion(BaseModel):
    """OpenAI's chat completion, with the whole reply under `ragtune`."""

    id: str
    object: str = "chat.completion"
    created: int
    model: str
    choices: list[ChatChoice]
    ragtune: QueryReply
