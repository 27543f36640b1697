"""An agent's run as one answer under ragtune's answer contract, so every answer metric applies to it."""

from __future__ import annotations

from typing import Any

from haystack import Document, component, default_from_dict, default_to_dict
from haystack.core.serialization import component_from_dict, component_to_dict, import_class_by_name
from haystack.dataclasses import ChatMessage, GeneratedAnswer

from components.answer.answer_meta import AgentRun, AnswerMeta
from components.answer.citation_verifier import CitationVerifier
from components.common.text import refusal_for

# The tool whose call is the answer (pipelines/agentic.py makes it the exit condition).
FINAL_ANSWER = "final_answer"
# Marks the floor search's call (pipelines/agent_floor.py) in a message's meta and as its call id: made for the
# model, before its first step, so it is not one of the model's calls.
FLOOR_SEARCH = "floor_search"
# What gave an agent's answer (AgentRun's `answered_by`).
BY_MODEL, BY_FLOOR, BY_NONE = "model", "floor", "none"
# Why a run stopped without an answer, as the refusal says it.
STOP_REASONS = {
    "max_agent_steps": "step limit",
    "token_budget_exceeded": "token budget",
    "timeout": "time limit",
    "repeated_call": "repeated tool call",
    "length": "token limit of a step or of the context window",
    "text": "no tool call",
}


@component
class AgentAnswer:
    """
    Turns what Haystack's `Agent` returns into a `GeneratedAnswer` that keeps the answer contract.

    The answer is the `final_answer` call's text. Its citations name documents by `doc_id` (a passage's, or a table
    row's `sql:<table>/<key>`), and only documents the tools returned in this run count: the CitationVerifier then
    checks each sentence against the documents it cites, as for any generated answer. A run that stopped for any
    other reason (steps, tokens, time, a repeated call) is answered by `floor_answer`, the wrapped pipeline's own
    answer stage, from the run's context (the floor search's passages first), so the agent never answers worse
    than that pipeline because its model stopped; without one, it is an honest refusal that says why. The answer's
    meta also keeps the run: `agent` holds its steps, the model's tool calls in order (the floor search, which was
    made for it, left out), tool-call counts, stop reason and what answered.

    The documents the run retrieved are the floor search's whole ranking (`ranking`), then what the tools returned
    that it lacks: what came later is appended, never ranked above the floor's.

    ### Usage example
    ```python
    answer = AgentAnswer(refusals={"en": "I cannot answer this from the provided documents."})
    answer.run(query=q, messages=out["messages"], documents=out["documents"], exit_reason=out["exit_reason"],
               step_count=out["step_count"], tool_call_counts=out["tool_call_counts"])
    ```
    """

    answer_meta_keys = (*CitationVerifier.answer_meta_keys, "agent", "refusal_reason", "unknown_citations")

    def __init__(
        self,
        refusals: dict[str, str],
        refusal_patterns: list[str] | None = None,
        support_threshold: float = 0.5,
        floor_answer: Any | None = None,
    ) -> None:
        """
        :param refusals: Language -> the refusal sentence; a stopped run's refusal adds why it stopped.
        :param refusal_patterns: Regular expressions that also count as a refusal in the final answer.
        :param support_threshold: Minimum lexical support for a sentence to count as supported by its citations.
        :param floor_answer: A component answering `query` from `documents` under the answer contract (`answers`),
            run when the model stopped without a final answer; None: such a run is a refusal.
        """
        self.refusals = dict(refusals)
        self.refusal_patterns = list(refusal_patterns or [])
        self.support_threshold = support_threshold
        self.floor_answer = floor_answer
        self._verifier = CitationVerifier(refusals, refusal_patterns, support_threshold)

    def warm_up(self) -> None:
        if self.floor_answer is not None and hasattr(self.floor_answer, "warm_up"):
            self.floor_answer.warm_up()

    @component.output_types(answers=list[GeneratedAnswer], documents=list[Document], retrieved=list[Document])
    def run(
        self,
        query: str,
        messages: list[ChatMessage],
        exit_reason: str,
        step_count: int,
        tool_call_counts: dict[str, int],
        documents: list[Document] | None = None,
        token_usage: dict[str, Any] | None = None,
        ranking: list[Document] | None = None,
    ) -> dict[str, Any]:
        """
        :param query: The question.
        :param messages: The run's conversation (tool calls and results included).
        :param exit_reason: Why the Agent stopped (`final_answer` when it answered).
        :param step_count: Model calls made.
        :param tool_call_counts: Calls per tool.
        :param documents: What the tools returned, passages and table rows alike, in order.
        :param token_usage: The run's token counts.
        :param ranking: The floor search's whole retrieval ranking, which its passages are cut from; None without one.
        :returns: `answers`: one answer under the answer contract; `documents`: what the tools returned, each once,
            in the order they first came (the question's context); `retrieved`: the floor's ranking, then those of
            `documents` it lacks (the question's retrieval).
        """
        context = _unique(documents or [])
        retrieved = _unique([*(ranking or []), *context])
        calls = [call for message in messages if not message.meta.get(FLOOR_SEARCH) for call in message.tool_calls]
        usage = {k: v for k, v in (token_usage or {}).items() if isinstance(v, int)}
        final = next((c for c in reversed(calls) if c.tool_name == FINAL_ANSWER), None)
        answered = exit_reason == FINAL_ANSWER and final is not None
        by = BY_MODEL if answered else BY_FLOOR if self.floor_answer is not None else BY_NONE
        run = AgentRun(steps=step_count, tools=[c.tool_name for c in calls], tool_calls=dict(tool_call_counts),
                       stop_reason=exit_reason, answered_by=by)
        if by != BY_MODEL:
            stopped = self._floor(query, context, run) if by == BY_FLOOR else self._stopped(query, run, usage)
            return {"answers": [stopped], "documents": context, "retrieved": retrieved}
        cited = [str(c) for c in final.arguments.get("citations") or []]
        markers = {c: _marker(c, context) for c in cited}
        known = sorted({m for m in markers.values() if m is not None})
        text = str(final.arguments.get("answer") or "").strip()
        reply = f"{text} [{', '.join(map(str, known))}]" if known and text else text
        (answer,) = self._verifier.run(query=query, replies=[ChatMessage.from_assistant(reply)], documents=context)[
            "answers"]
        meta = AnswerMeta(**{**answer.meta, "usage": usage}, agent=run,  # type: ignore[typeddict-item]
                          unknown_citations=[c for c, m in markers.items() if m is None])
        answer = GeneratedAnswer(data=answer.data, query=query, documents=answer.documents, meta=meta)
        return {"answers": [answer], "documents": context, "retrieved": retrieved}

    def _floor(self, query: str, context: list[Document], run: AgentRun) -> GeneratedAnswer:
        """The answer stage's answer from the run's context, with the run's steps. Its `usage` stays the stage's
        own: the agent's steps ran through a chat generator, whose calls are traced and counted apart."""
        (answer,) = self.floor_answer.run(query=query, documents=context)["answers"]
        meta = AnswerMeta(**answer.meta, agent=run, unknown_citations=[])  # type: ignore[typeddict-item]
        return GeneratedAnswer(data=answer.data, query=query, documents=answer.documents, meta=meta)

    def _stopped(self, query: str, run: AgentRun, usage: dict[str, int]) -> GeneratedAnswer:
        refusal, reason = refusal_for(self.refusals, query), run["stop_reason"]
        meta = AnswerMeta(refused=True, citations=[], unsupported_sentences=[], sentences=[], invalid_citations=[],
                          usage=usage, refusal_reason=f"agent_{reason}", agent=run, unknown_citations=[])
        return GeneratedAnswer(data=f"{refusal} ({STOP_REASONS.get(reason, reason)})", query=query, documents=[],
                               meta=meta)

    def to_dict(self) -> dict[str, Any]:
        floor = None if self.floor_answer is None else component_to_dict(self.floor_answer, "floor_answer")
        return default_to_dict(self, refusals=self.refusals, refusal_patterns=self.refusal_patterns,
                               support_threshold=self.support_threshold, floor_answer=floor)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AgentAnswer:
        floor = data["init_parameters"].get("floor_answer")
        if floor is not None:
            data["init_parameters"]["floor_answer"] = component_from_dict(
                import_class_by_name(floor["type"]), floor, "floor_answer")
        return default_from_dict(cls, data)


def _unique(documents: list[Document]) -> list[Document]:
    seen: dict[str, Document] = {}
    for document in documents:
        seen.setdefault(document.id, document)
    return list(seen.values())


def _marker(citation: str, context: list[Document]) -> int | None:
    """The 1-based position of the first document the citation names, by doc_id or id, with or without brackets."""
    name = citation.strip().strip("[]")
    for position, document in enumerate(context, start=1):
        if name in (document.meta.get("doc_id"), document.id):
            return position
    return None
