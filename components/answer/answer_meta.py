"""The answer contract as types: what an answer component promises in `GeneratedAnswer.meta`.

Components build their meta as an `AnswerMeta`; pipelines/answer_contract.py checks, when a pipeline is built, that
the answer component declares the required keys (`answer_meta_keys`), and on every answer that they hold the right
types; evaluation and serving read them. The meta stays a plain dict at run time (a TypedDict), so Haystack
serialises answers as before.
"""

# No `from __future__ import annotations`: TypedDict must see `Required` to know the required keys.
from typing import Required, TypedDict, get_origin, get_type_hints


class CitationMeta(TypedDict):
    """One cited context chunk: its `[n]` marker, its chunk and document, and the chunk's span in the document."""

    marker: int
    chunk_id: str
    doc_id: str | None
    start: int | None
    end: int | None


class SentenceSupport(TypedDict):
    """One answer sentence, the markers it cites, and how far those chunks support it."""

    text: str
    citations: list[int]
    support: float
    supported: bool


class AgentRun(TypedDict):
    """How an agent reached its answer: model calls, the tools it called in order and per tool, why it stopped, and
    what gave the answer: `model` (its final_answer), `floor` (the pipeline's answer stage on the run's context, the
    model having stopped without one) or `none` (a refusal that says why it stopped)."""

    steps: int
    tools: list[str]
    tool_calls: dict[str, int]
    stop_reason: str
    answered_by: str


class AnswerMeta(TypedDict, total=False):
    # Required: the answer declines to answer ("I don't know"); refusal metrics read only this.
    refused: Required[bool]
    # Required: one entry per cited context chunk.
    citations: Required[list[CitationMeta]]
    # Required: answer sentences that their citations do not support.
    unsupported_sentences: Required[list[str]]
    # Scored when present.
    sentences: list[SentenceSupport]
    invalid_citations: list[int]  # markers of chunks that were not in the context
    usage: dict[str, int]  # token counts; `llm_calls` from a component that calls a model outside a chat generator
    raw: str  # the reply before citations were checked
    refusal_reason: str  # why a branch refused (self-check, a fixed reply)
    reply_reason: str  # why a branch answered without the answer stage
    selfcheck_retries: int
    agent: AgentRun  # an agent's run (pipeline=agentic)
    unknown_citations: list[str]  # what an agent cited that its tools never returned


# The keys every answer carries, in the order the contract documents them.
REQUIRED_KEYS: tuple[str, ...] = tuple(key for key in AnswerMeta.__annotations__ if key in AnswerMeta.__required_keys__)
# Their runtime types (`list[CitationMeta]` -> list), for the check on every answer.
REQUIRED_TYPES: dict[str, type] = {
    key: get_origin(hint) or hint for key, hint in get_type_hints(AnswerMeta).items() if key in REQUIRED_KEYS
}


def uncited_meta(refused: bool) -> AnswerMeta:
    """The meta of an answer that cites nothing and so has nothing unsupported."""
    return AnswerMeta(refused=refused, citations=[], unsupported_sentences=[], sentences=[], invalid_citations=[])
