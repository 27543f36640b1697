"""What a built pipeline is at run time: the Haystack pipeline plus the spec facts that evaluation and serving read
(golden-field inputs, views, answer sockets, route, grader, rewriter), so that neither needs the spec again."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import networkx
from haystack import Document, Pipeline
from haystack.dataclasses import ChatMessage, GeneratedAnswer, StreamingChunk

from pipelines.answer_contract import check_answer
from pipelines.haystack_compat import input_sockets, output_sockets
from pipelines.instrumentation import chat_generators
from pipelines.spec import ModelSlot, Socket

# A chat history turn's role -> the Haystack message it becomes.
ROLES = {"user": ChatMessage.from_user, "assistant": ChatMessage.from_assistant, "system": ChatMessage.from_system}


@dataclass
class BuiltPipeline:
    """A Haystack pipeline plus the spec facts evaluation needs: golden-field inputs, named views, answer, route.

    `views` maps a view name to the socket scored under it: `retrieval` and `context` first (when the spec has
    them), then the spec's own `views`, then `stage/<component>` for every `list[Document]` output.
    """

    name: str
    pipeline: Pipeline
    inputs: dict[str, list[Socket]]
    views: dict[str, Socket] = field(default_factory=dict)
    answer_output: Socket | None = None
    answer_branches: tuple[Socket, ...] = ()
    route_component: str | None = None
    grader: str | None = None
    # The component named by `question_from`: its `question` (and `queries`, `fallback`) outputs are the rewrite.
    rewriter: str | None = None
    # `model_slots` of the spec (pipelines/spec.py): the LLM slot -> the config section and component that run it.
    model_slots: dict[str, ModelSlot] = field(default_factory=dict)
    # The socket naming the retrieval paths dropped for a question: the fusion joiner's `degraded` when the spec
    # guards its paths (`path_guards`, pipelines/path_guards.py), or the spec's `degraded_output` (the agent's).
    degraded_output: Socket | None = None

    @property
    def retrieval_output(self) -> Socket | None:
        return self.views.get("retrieval")

    @property
    def context_output(self) -> Socket | None:
        return self.views.get("context")

    @property
    def llm_components(self) -> frozenset[str]:
        """Components that are, or hold, a chat generator (QueryExpander, LLMRanker, Agent): they may call an LLM."""
        return frozenset(name for name, instance in self.pipeline.walk() if chat_generators([instance]))

    def request_inputs(
        self,
        question: str,
        history: Sequence[Mapping[str, str]] | None = None,
        filters: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """A question with its chat history ({role, content} turns) and filters as this pipeline's inputs; a golden
        item and a served request go in the same way, and what the pipeline does not read is left out."""
        fields: dict[str, Any] = {"question": question}
        if history and "history" in self.inputs:
            fields["history"] = [ROLES[turn["role"]](turn["content"]) for turn in history]
        if filters and "filters" in self.inputs:
            fields["filters"] = dict(filters)
        return fields

    def warm_up(self) -> dict[str, float]:
        """Warms each component up; returns seconds per component so index loading and model loading can be told apart."""
        seconds = {}
        for name, instance in self.pipeline.walk():
            if hasattr(instance, "warm_up"):
                start = time.perf_counter()
                instance.warm_up()
                seconds[name] = time.perf_counter() - start
        return seconds

    @functools.cached_property
    def streaming_components(self) -> tuple[str, ...]:
        """The components upstream of the answer that take a `streaming_callback` (Haystack's chat generators)."""
        if self.answer_output is None:
            return ()
        upstream = networkx.ancestors(self.pipeline.graph, self.answer_output.component)
        return tuple(
            name
            for name in sorted(upstream)
            if "streaming_callback" in input_sockets(self.pipeline.get_component(name))
        )

    def run(
        self, streaming_callback: Callable[[StreamingChunk], None] | None = None, **inputs: Any
    ) -> dict[str, dict[str, Any]]:
        """Runs with golden-field inputs; returns the outputs of every view, the answer and the route component.

        `streaming_callback` gets the answer generator's chunks as they are produced (none when it generates none)."""
        unknown = set(inputs) - set(self.inputs)
        if unknown:
            raise ValueError(f"pipeline '{self.name}' has no input(s) {sorted(unknown)}; inputs: {sorted(self.inputs)}")
        data: dict[str, dict[str, Any]] = {}
        for name, value in inputs.items():
            for socket in self.inputs[name]:
                data.setdefault(socket.component, {})[socket.name] = value
        if streaming_callback is not None:
            for name in self.streaming_components:
                data.setdefault(name, {})["streaming_callback"] = streaming_callback
        wanted = {s.component for s in (*self.views.values(), *self._answer_sockets)}
        wanted |= {self.route_component, self.rewriter, self.grader} - {None}
        if self.degraded_output is not None:
            wanted.add(self.degraded_output.component)
        return self.pipeline.run(data=data, include_outputs_from=wanted)

    def view_documents(self, outputs: Mapping[str, Mapping[str, Any]]) -> dict[str, list[Document]]:
        """The documents at every view, in view order; a view on a branch that did not run is empty."""
        return {view: self.documents_at(outputs, socket) for view, socket in self.views.items()}

    def documents_at(self, outputs: Mapping[str, Mapping[str, Any]], socket: Socket | None) -> list[Document]:
        if socket is None:
            return []
        return list(outputs.get(socket.component, {}).get(socket.name) or [])

    def route(self, outputs: Mapping[str, Mapping[str, Any]]) -> str | None:
        """The route this question took, e.g. `single_step`: the first output of the route component that fired,
        in its declared order (a ConditionalRouter route with several outputs is named by its first)."""
        if self.route_component is None:
            return None
        fired = outputs.get(self.route_component, {})
        router = self.pipeline.get_component(self.route_component)
        for route in getattr(router, "routes", None) or []:  # a ConditionalRouter: routes may share an output
            names = route["output_name"] if isinstance(route["output_name"], list) else [route["output_name"]]
            if fired and set(names) == set(fired):
                return names[0]
        declared = output_sockets(router)
        return next((name for name in declared if name in fired), "none")

    def degraded(self, outputs: Mapping[str, Mapping[str, Any]]) -> list[str] | None:
        """The retrieval paths dropped for this question (they failed or timed out); None when the pipeline's paths
        are not guarded, [] when none was dropped or fusion did not run (a route that retrieves nothing)."""
        if self.degraded_output is None:
            return None
        dropped = outputs.get(self.degraded_output.component, {}).get(self.degraded_output.name) or []
        return list(dict.fromkeys(dropped))  # an agent's searches each name the paths they dropped

    @property
    def _answer_sockets(self) -> tuple[Socket, ...]:
        return (self.answer_output, *self.answer_branches) if self.answer_output is not None else ()

    def answer(self, outputs: Mapping[str, Mapping[str, Any]]) -> GeneratedAnswer | None:
        """The answer the pipeline gave (the answer stage's, else a branch's), or None for a retrieval-only pipeline."""
        for socket in self._answer_sockets:
            answers = outputs.get(socket.component, {}).get(socket.name) or []
            if answers:
                return check_answer(answers[0], socket.component)
        return None
