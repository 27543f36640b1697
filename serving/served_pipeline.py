"""A promoted run's pipeline, filled from its bundle's snapshot and warm: what serve.py and the pyfunc model ask.

It answers with the filters it is given; the callers (serving/http/, serving/pyfunc_answerer.py) scope every
request to its principal first.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from haystack import Document
from haystack.dataclasses import StreamingChunk, ToolCallResult
from haystack.tracing import Tracer

from components.agents.agent_answer import FINAL_ANSWER
from components.retrievers.retrieval import stored_rows
from experiments.evaluation.grading_metrics import grading_record
from experiments.runs.indexed import IndexedPipeline, prepare_pipeline
from pipelines.access import IndexAccess
from pipelines.answer_contract import answer_fields
from pipelines.index import DamagedIndexError
from pipelines.instrumentation import timing_components
from serving.bundle import PromotionError, check_identities, read_bundle

SNIPPET_CHARS = 240


@dataclass
class ServedPipeline:
    """A bundle's pipeline, filled from its snapshot and warm. One question runs at a time: llama.cpp models must
    never be called from two threads at once, and the pipeline's components are not thread-safe."""

    indexed: IndexedPipeline
    access: IndexAccess
    lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def load(cls, folder: Path) -> ServedPipeline:
        bundle = read_bundle(folder)
        indexed = prepare_pipeline(bundle.settings, snapshot=bundle.index)
        check_identities(bundle.models, indexed.models)
        try:
            return cls.warm(indexed, bundle.access)
        except DamagedIndexError as e:
            raise PromotionError(f"bundle {folder} is damaged: {bundle.index.relative_to(folder)}: {e}") from None

    @classmethod
    def warm(cls, indexed: IndexedPipeline, access: IndexAccess | None = None) -> ServedPipeline:
        """Fills the store and warms every component: ready for the first question. Who may see what is read
        from the filled store itself where it is in memory, so it is the truth of what is served."""
        indexed.index()
        indexed.warm_up()
        if not indexed.server_side:
            # The chunks without their vectors: the store's own rows, never a Python list of floats per chunk.
            metas = ((d.meta.get("doc_id", d.id), d.meta) for d in stored_rows(indexed.store).documents)
            access = IndexAccess.of(metas, access.meta_file if access else None)
        elif access is None:
            raise PromotionError(
                f"index {indexed.fingerprint} lives on a server, where who may see what cannot be read back: it "
                "must be given (a bundle's access.json)"
            )
        return cls(indexed, access)

    @property
    def takes_filters(self) -> bool:
        return "filters" in self.indexed.query.inputs

    def ask(
        self,
        question: str,
        history: Sequence[Mapping[str, str]] | None = None,
        filters: Mapping[str, Any] | None = None,
        stages: bool = False,
        on_token: Callable[[str], None] | None = None,
        on_step: Callable[[dict[str, Any]], None] | None = None,
        tracer: Tracer | None = None,
    ) -> dict[str, Any]:
        """The reply a run's per_question.jsonl records for this question (answer, refusal, citations), plus the
        route and CRAG label where the pipeline has them, a snippet of each cited chunk, and milliseconds per
        component (`stages_ms`); with `stages`, the chunk and doc ids at every stage, to see which layer returned what.
        `on_token` gets the answer generator's text as it is produced (raw: before the citation check); `on_step`
        gets each tool call of an agent with the start of its result (serving.replies.AgentStep), as it returns;
        `tracer` gets this question's spans (a sampled request of serving.online.traces)."""
        query = self.indexed.query
        if filters and not self.takes_filters:  # dropping them would serve documents the caller may not see
            raise PromotionError(f"pipeline {query.name} has no 'filters' input: it cannot serve filtered requests")
        with self.lock, timing_components(tracer) as timer:
            outputs = query.run(
                streaming_callback=_streaming_callback(on_token, on_step),
                **query.request_inputs(question, history, filters),
            )
            spent = timer.take()
        answer = query.answer(outputs)
        reply: dict[str, Any] = {"answer": None, "refused": False, "citations": []}
        if answer is not None:
            reply = answer_fields(answer)
            snippets = {doc.id: (doc.content or "")[:SNIPPET_CHARS] for doc in answer.documents}
            reply["citations"] = [c | {"snippet": snippets.get(c.get("chunk_id"), "")} for c in reply["citations"]]
        reply["documents"] = [
            _reference(d) | {"score": d.score}
            for d in query.documents_at(outputs, query.context_output or query.retrieval_output)
        ]
        if query.route_component is not None:
            reply["route"] = query.route(outputs)
        reply["degraded"] = query.degraded(outputs) or []
        if query.grader is not None:
            reply["crag_label"] = grading_record(outputs.get(query.grader, {}))["crag_label"]
        if answer is not None and "agent" in answer.meta:
            reply["agent"] = answer.meta["agent"]
        if stages:
            reply["stages"] = {view: [_reference(d) for d in docs] for view, docs in query.view_documents(outputs).items()}
        reply["stages_ms"] = {name: round(ms, 1) for name, ms in spent.ms.items()}
        return reply


def _streaming_callback(
    on_token: Callable[[str], None] | None, on_step: Callable[[dict[str, Any]], None] | None
) -> Callable[[StreamingChunk], None] | None:
    """A Haystack streaming callback that hands on each chunk's text, and each tool result an Agent's tool invoker
    streams as a step (final_answer's result is the unchecked answer: the reply carries the checked one)."""
    if on_token is None and on_step is None:
        return None

    def callback(chunk: StreamingChunk) -> None:
        result = chunk.tool_call_result
        if result is not None:
            if on_step is not None and result.origin.tool_name != FINAL_ANSWER:
                on_step(_agent_step(result))
        elif chunk.content and on_token is not None:
            on_token(chunk.content)

    return callback


def _agent_step(result: ToolCallResult) -> dict[str, Any]:
    """A tool call and the start of its result, as /query streams it (serving.replies.AgentStep)."""
    return {
        "tool": result.origin.tool_name,
        "arguments": dict(result.origin.arguments),
        "error": result.error,
        "observation": result.result[:SNIPPET_CHARS],
    }


def _reference(document: Document) -> dict[str, Any]:
    return {"chunk_id": document.id, "doc_id": document.meta.get("doc_id")}


