"""The one place where a pipeline spec (YAML data) becomes a `haystack.Pipeline`.

A spec has `components` (`_target_` + init params, or `none`), `connections` (`[sender.socket, receiver.socket]`,
as one list or as named lists, so that a config extending another adds a group instead of copying the list),
and the contract with evaluation and serving:
- `inputs` map golden fields (`question`, `history`, `filters`) to the sockets that receive them (a list, or
  named lists like `connections`, so that an extending config adds a group);
- `retrieval_output` and `context_output` are the headline views (`retrieval/`, `context/`); `views` names more
  (`name: component.socket`), and every `list[Document]` output is also scored as `stage/<component>`;
- `route` names a component (e.g. a ConditionalRouter) whose fired output is recorded per question;
- `grader` names a component (components.crag_evaluator.CRAGEvaluator) whose `label` and `graded` outputs are
  recorded per question;
- `answer_branches` names more answer sockets for branches that answer without the answer stage (an honest
  refusal); per question the answer stage's answer is read first, then these;
- `question_from` puts a rewriting component first: every socket under `inputs.question` receives its output
  instead, and the question goes to its own `question` input (evaluation reads its `queries`/`fallback` outputs);
- `queries_from` (`{socket, question, paths}`, optionally `filters` and `query`) puts an expanding component
  first (e.g. Haystack's QueryExpander): the question goes to the socket named by `question`, and each retrieval
  path named under `paths` runs once per query of the `socket` output (components.multi_query_retriever), a dense
  path together with the embedder in front of it; `query` feeds the paths' question from a socket instead of the
  pipeline input (a router's branch, so that nothing is retrieved on a route that does not retrieve).
An optional `answer` stage (the `answer` config group) is merged in: its components and connections join the
graph, its `context` input is fed from the pipeline's `context_output`, and it names the `answer_output`, whose
component must declare the answer contract (pipelines/answer_contract.py).
Everything is checked before any component does work, and every error names the spec key at fault.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import time
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import networkx
from haystack import Document, Pipeline
from haystack.core.errors import PipelineConnectError
from haystack.dataclasses import GeneratedAnswer, StreamingChunk
from haystack.utils.type_serialization import deserialize_type, serialize_type
from omegaconf import DictConfig, ListConfig, OmegaConf

from components.pass_through import PassThrough
from pipelines import fast_copy
from pipelines.answer_contract import DECLARATION, REQUIRED_KEYS, check_answer, missing_declaration
from pipelines.errors import UserError
from pipelines.instrumentation import chat_generators

fast_copy.install()

SPEC_KEYS = {
    "name",
    "description",
    "components",
    "connections",
    "inputs",
    "retrieval_output",
    "context_output",
    "answer",
    "answer_output",
    "views",
    "route",
    "grader",
    "answer_branches",
    "question_from",
    "queries_from",
    "max_runs_per_component",
}
QUERIES_FROM_KEYS = ("socket", "question", "paths")
# Optional: `filters`, the expander's filters input; `query`, the socket that feeds each path's `query` (default:
# the pipeline's question; a router's branch, so that a path runs only on the routes that retrieve).
QUERIES_FROM_OPTIONAL = ("filters", "query")
MULTI_QUERY = "components.multi_query_retriever.MultiQueryRetriever"
PER_QUERY_INPUTS = ("query_embedding", "filters")  # what a wrapped path may receive from other components
ANSWER_KEYS = {"components", "connections", "inputs", "context_output", "answer_output", "description"}
# The answer stage's input that receives the retrieval pipeline's context documents.
CONTEXT_INPUT = "context"
# Pipeline inputs are golden fields: evaluation feeds each item's field to the sockets named under it.
GOLDEN_INPUTS = ("question", "history", "filters")
HEADLINE_VIEWS = ("retrieval", "context")
STAGE_PREFIX = "stage/"
NONE_VALUES = {None, "none", "None", "null"}
# Params that Haystack components expect as Python types (BranchJoiner, OutputAdapter, ConditionalRouter routes);
# YAML gives their names.
TYPE_KEYS = {"output_type", "type_"}


class PipelineConfigError(UserError, ValueError):
    """A pipeline spec that cannot be built; the message names the key at fault."""


@dataclass(frozen=True)
class Socket:
    component: str
    name: str

    def __str__(self) -> str:
        return f"{self.component}.{self.name}"


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
            if "streaming_callback" in self.pipeline.get_component(name).__haystack_input__._sockets_dict
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
        declared = router.__haystack_output__._sockets_dict
        return next((name for name in declared if name in fired), "none")

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


def build_pipeline(
    spec: DictConfig | Mapping[str, Any],
    resources: Mapping[str, Any] | None = None,
    key: str = "pipeline",
    input_names: Sequence[str] | None = None,
) -> BuiltPipeline:
    """Validates `spec` and builds the pipeline. `resources` fill `"@name"` init params (e.g. `@store`);
    `input_names` restricts the inputs (evaluated pipelines take golden fields: GOLDEN_INPUTS, with `question`)."""
    spec = _with_answer_stage(_flat_connections(_to_container(spec, key), key), key)
    spec = _with_question_from(_with_queries_from(spec, key), key)
    unknown = set(spec) - SPEC_KEYS
    if unknown:
        raise PipelineConfigError(f"{key}: unknown key(s) {sorted(unknown)}; allowed: {sorted(SPEC_KEYS)}")
    components_spec = spec.get("components")
    if not isinstance(components_spec, dict) or not components_spec:
        raise PipelineConfigError(f"{key}.components: must be a non-empty mapping of name -> component config")
    connections = [_parse_connection(c, f"{key}.connections[{i}]") for i, c in enumerate(spec.get("connections") or [])]
    inputs = _parse_inputs(spec.get("inputs"), key, input_names)
    for where, socket in _referenced_components(connections, inputs, key):
        if socket.component not in components_spec:
            raise PipelineConfigError(
                f"{where}: unknown component '{socket.component}'; components: {sorted(components_spec)}"
            )

    resources = dict(resources or {})
    instances: dict[str, Any] = {}
    none_slots = [name for name, cfg in components_spec.items() if _is_none(cfg)]
    for name, cfg in components_spec.items():
        if name not in none_slots:
            instances[name] = _instantiate(cfg, f"{key}.components.{name}", resources)
    while none_slots:  # a none slot takes its socket types from its senders, so senders come first
        ready = [n for n in none_slots if all(s.component in instances for s, r in connections if r.component == n)]
        if not ready:
            raise PipelineConfigError(f"{key}.components: the 'none' slots {none_slots} feed each other in a loop")
        for name in ready:
            instances[name] = _pass_through(name, connections, inputs, instances, key)
            none_slots.remove(name)

    pipeline = Pipeline(max_runs_per_component=int(spec.get("max_runs_per_component", 100)))
    for name, instance in instances.items():
        pipeline.add_component(name, instance)
    for (sender, receiver), where in zip(
        connections, (f"{key}.connections[{i}]" for i in range(len(connections))), strict=True
    ):
        _check_socket(pipeline, sender, "output", where)
        _check_socket(pipeline, receiver, "input", where)
        try:
            pipeline.connect(str(sender), str(receiver))
        except PipelineConnectError as e:
            raise PipelineConfigError(f"{where}: cannot connect {sender} -> {receiver}: {e}") from e
    for name, sockets in inputs.items():
        for socket in sockets:
            _check_socket(pipeline, socket, "input", f"{key}.inputs.{name}")

    answer_output = None
    if spec.get("answer_output") is not None:
        answer_output = _parse_socket(spec["answer_output"], f"{key}.answer.answer_output")
        _check_answer_output(pipeline, answer_output, f"{key}.answer.answer_output")
    branches = _socket_list(spec.get("answer_branches"))
    if branches and answer_output is None:
        raise PipelineConfigError(f"{key}.answer_branches: a pipeline without an answer stage has no answers to branch")
    answer_branches = tuple(_parse_socket(s, f"{key}.answer_branches[{i}]") for i, s in enumerate(branches))
    for i, socket in enumerate(answer_branches):
        _check_answer_output(pipeline, socket, f"{key}.answer_branches[{i}]")
    for name in ("route", "grader"):
        if spec.get(name) is not None and spec[name] not in components_spec:
            raise PipelineConfigError(f"{key}.{name}: unknown component {spec[name]!r}; components: {sorted(components_spec)}")

    return BuiltPipeline(
        name=str(spec.get("name", key)),
        pipeline=pipeline,
        inputs=inputs,
        views=_views(pipeline, spec, key),
        answer_output=answer_output,
        answer_branches=answer_branches,
        route_component=spec.get("route"),
        grader=spec.get("grader"),
        rewriter=_rewriter(spec),
    )


def _rewriter(spec: Mapping[str, Any]) -> str | None:
    """The component whose outputs are the rewrite: the `question_from` one, else the `queries_from` expander's
    (`<expander>.queries`; a joiner of several routes' queries, as in adaptive, is no single rewriter)."""
    if spec.get("question_from"):
        return str(spec["question_from"]).split(".")[0]
    source = str((spec.get("queries_from") or {}).get("socket") or "")
    return source.split(".")[0] if source.endswith(".queries") else None


def _flat_connections(spec: dict[str, Any], key: str) -> dict[str, Any]:
    """Named connection groups (`{retrieve: [...], compress: [...]}`) become one list, groups in order."""
    groups = spec.get("connections")
    if isinstance(groups, Mapping):
        for name, group in groups.items():
            if not isinstance(group, list):
                raise PipelineConfigError(f"{key}.connections.{name}: expected a list of [sender, receiver] pairs")
        spec = spec | {"connections": [pair for group in groups.values() for pair in group]}
    return spec


def _with_question_from(spec: dict[str, Any], key: str) -> dict[str, Any]:
    """`question_from: rewriter.question`: the rewriter takes the question, every former receiver takes its output."""
    source = spec.get("question_from")
    if source is None:
        return spec
    socket = _parse_socket(source, f"{key}.question_from")
    inputs = {name: _socket_list(targets) for name, targets in (spec.get("inputs") or {}).items()}
    targets = [t for t in inputs.get("question", []) if _parse_socket(t, f"{key}.inputs.question").component != socket.component]
    if not targets:
        raise PipelineConfigError(f"{key}.question_from: inputs.question names no socket to feed from {source}")
    inputs["question"] = [f"{socket.component}.question"]
    return spec | {"inputs": inputs, "connections": [*(spec.get("connections") or []), *([source, t] for t in targets)]}


def _with_queries_from(spec: dict[str, Any], key: str) -> dict[str, Any]:
    """`queries_from: {socket: rewriter.queries, question: rewriter.query, paths: [bm25, dense]}`: the expander
    takes the question, and each named path becomes a MultiQueryRetriever fed its queries (see the module doc)."""
    value = spec.get("queries_from")
    if value is None:
        return spec
    where = f"{key}.queries_from"
    if not isinstance(value, Mapping) or not set(QUERIES_FROM_KEYS) <= set(value) <= {*QUERIES_FROM_KEYS, *QUERIES_FROM_OPTIONAL}:
        raise PipelineConfigError(
            f"{where}: expected a mapping with {list(QUERIES_FROM_KEYS)} and optionally {list(QUERIES_FROM_OPTIONAL)}, "
            f"got {value!r}"
        )
    path_query = _parse_socket(value["query"], f"{where}.query") if value.get("query") else None
    source = _parse_socket(value["socket"], f"{where}.socket")
    question = _parse_socket(value["question"], f"{where}.question")
    paths = value["paths"]
    if not isinstance(paths, list) or not paths:
        raise PipelineConfigError(f"{where}.paths: expected a non-empty list of retriever component names")
    components = dict(spec.get("components") or {})
    connections = [_parse_connection(c, f"{key}.connections[{i}]") for i, c in enumerate(spec.get("connections") or [])]
    inputs = {name: _socket_list(targets) for name, targets in (spec.get("inputs") or {}).items()}
    questions = [_parse_socket(t, f"{key}.inputs.question") for t in inputs.get("question", [])]
    for i, path in enumerate(paths):
        at = f"{where}.paths[{i}]"
        if path not in components or _is_none(components[path]):
            raise PipelineConfigError(f"{at}: {path!r} is not a retriever of this pipeline; components: {sorted(components)}")
        others = [str(r) for s, r in connections if r.component == path and r.name not in PER_QUERY_INPUTS]
        if others:
            raise PipelineConfigError(f"{at}: {path!r} also takes {others}, so it cannot run once per query")
        embedders = [s for s, r in connections if r == Socket(path, "query_embedding")]
        wrapped: dict[str, Any] = {"_target_": MULTI_QUERY, "retriever": components[path]}
        if embedders:
            embedder = embedders[0].component
            if any(s.component == embedder and r.component != path for s, r in connections):
                raise PipelineConfigError(f"{at}: the embedder {embedder!r} in front of {path!r} feeds other components too")
            wrapped["query_embedder"] = components.pop(embedder)
            connections = [(s, r) for s, r in connections if s.component != embedder]
            questions = [q for q in questions if q.component != embedder]
        elif path_query is None and Socket(path, "query") not in questions:
            raise PipelineConfigError(
                f"{at}: {path!r} takes no question (inputs.question has no {path}.query and no embedder feeds "
                f"{path}.query_embedding)"
            )
        components[path] = wrapped
        questions = [q for q in questions if q.component != path] + ([Socket(path, "query")] if path_query is None else [])
        connections.append((source, Socket(path, "queries")))
        if path_query is not None:
            connections.append((path_query, Socket(path, "query")))
    inputs["question"] = [str(q) for q in [question, *questions]]
    if value.get("filters"):  # an expander that retrieves itself (decompose_sequential) sees the same documents
        inputs["filters"] = [*inputs.get("filters", []), str(_parse_socket(value["filters"], f"{where}.filters"))]
    return spec | {
        "components": components,
        "connections": [[str(s), str(r)] for s, r in connections],
        "inputs": inputs,
    }


def _parse_inputs(value: Any, key: str, names: Sequence[str] | None) -> dict[str, list[Socket]]:
    """Input name -> receiving sockets. With `names` (golden fields), others are refused and the first is required."""
    value = value or {}
    if not isinstance(value, Mapping):
        raise PipelineConfigError(f"{key}.inputs: expected a mapping of input name -> [component.socket, ...]")
    unknown = sorted(set(value) - set(names)) if names is not None else []
    if unknown:
        hint = " ('query' is now 'question')" if "query" in unknown else ""
        raise PipelineConfigError(f"{key}.inputs: unknown input(s) {unknown}{hint}; inputs are {', '.join(names)}")
    if names and names[0] not in value:
        raise PipelineConfigError(f"{key}.inputs.{names[0]}: required, the sockets that receive each {names[0]}")
    return {  # an input without sockets (a rewriter choice that reads no history) is no input at all
        name: [_parse_socket(s, f"{key}.inputs.{name}") for s in _socket_list(targets)]
        for name, targets in value.items()
        if targets
    }


def _views(pipeline: Pipeline, spec: Mapping[str, Any], key: str) -> dict[str, Socket]:
    """The headline views, then the spec's named ones, then one per `list[Document]` output of each component."""
    named: dict[str, tuple[Any, str]] = {
        view: (spec[f"{view}_output"], f"{key}.{view}_output") for view in HEADLINE_VIEWS if spec.get(f"{view}_output")
    }
    extra = spec.get("views") or {}
    if not isinstance(extra, Mapping):
        raise PipelineConfigError(f"{key}.views: expected a mapping of view name -> component.socket, got {extra!r}")
    for view, target in extra.items():
        if view in HEADLINE_VIEWS or str(view).startswith(STAGE_PREFIX):
            raise PipelineConfigError(
                f"{key}.views.{view}: reserved name; use {'/'.join(f'{v}_output' for v in HEADLINE_VIEWS)} "
                f"for the headline views, and every component output is already scored as {STAGE_PREFIX}<component>"
            )
        named[str(view)] = (target, f"{key}.views.{view}")
    views = {}
    for view, (target, where) in named.items():
        socket = _parse_socket(target, where)
        _check_socket(pipeline, socket, "output", where, must_be_documents=True)
        views[view] = socket
    return views | _stage_views(pipeline)


def _check_answer_output(pipeline: Pipeline, socket: Socket, where: str) -> None:
    _check_socket(pipeline, socket, "output", where)
    instance = pipeline.get_component(socket.component)
    annotation = instance.__haystack_output__._sockets_dict[socket.name].type
    if not _is_list_of(annotation, GeneratedAnswer):
        raise PipelineConfigError(f"{where}: {socket} is {annotation}, expected list[GeneratedAnswer]")
    missing = missing_declaration(instance)
    if missing:
        raise PipelineConfigError(
            f"{where}: {type(instance).__name__} does not declare the answer contract (meta {', '.join(REQUIRED_KEYS)}; "
            f"missing {missing} in its `{DECLARATION}`), so refusals and citations would read as absent. End the "
            f"answer stage with components.citation_verifier.CitationVerifier, or declare `{DECLARATION}` on a "
            "component that fills them (pipelines/answer_contract.py)"
        )


def reads_embeddings(spec: DictConfig | Mapping[str, Any], key: str = "pipeline") -> bool:
    """Whether a component of the pipeline takes a `query_embedding`: only then does its index need vectors.

    Decided from the config, before the index (whose fingerprint depends on it) exists.
    """
    spec = _with_answer_stage(_flat_connections(_to_container(spec, key), key), key)
    for name, cfg in (spec.get("components") or {}).items():
        if _is_none(cfg) or not isinstance(cfg, Mapping):
            continue
        run = getattr(_locate(cfg.get("_target_"), f"{key}.components.{name}"), "run", None)
        if callable(run) and "query_embedding" in inspect.signature(run).parameters:
            return True
    return False


def _with_answer_stage(spec: dict[str, Any], key: str) -> dict[str, Any]:
    """Merges the `answer` stage into the retrieval spec; its `context` input hangs off `context_output`."""
    stage = spec.pop("answer", None)
    if _is_none(stage):
        return spec
    where = f"{key}.answer"
    if not isinstance(stage, dict):
        raise PipelineConfigError(f"{where}: expected a mapping (the answer config group) or none, got {stage!r}")
    unknown = set(stage) - ANSWER_KEYS
    if unknown:
        raise PipelineConfigError(f"{where}: unknown key(s) {sorted(unknown)}; allowed: {sorted(ANSWER_KEYS)}")
    if not stage.get("answer_output"):
        raise PipelineConfigError(f"{where}.answer_output: names the socket that gives the answers, e.g. answer.answers")
    if not spec.get("context_output"):
        raise PipelineConfigError(f"{key}.context_output: an answer stage needs the pipeline's context_output")
    clash = sorted(set(stage.get("components") or {}) & set(spec.get("components") or {}))
    if clash:
        raise PipelineConfigError(f"{where}.components: {clash} already exist in the retrieval pipeline")
    merged = dict(spec)
    merged["components"] = {**(spec.get("components") or {}), **(stage.get("components") or {})}
    stage_inputs = dict(stage.get("inputs") or {})
    context_targets = _socket_list(stage_inputs.pop(CONTEXT_INPUT, []))
    merged["connections"] = [
        *(spec.get("connections") or []),
        *([spec["context_output"], target] for target in context_targets),
        *(stage.get("connections") or []),
    ]
    inputs = {name: _socket_list(targets) for name, targets in (spec.get("inputs") or {}).items()}
    for name, targets in stage_inputs.items():
        inputs.setdefault(name, []).extend(_socket_list(targets))
    merged["inputs"] = inputs
    merged["context_output"] = stage.get("context_output") or spec["context_output"]
    merged["answer_output"] = stage["answer_output"]
    return merged


def _socket_list(targets: Any) -> list[Any]:
    """An input's receiving sockets: YAML may give one socket as a plain string, none as null, or named groups
    (`{retrieve: [...], crag: [...]}`, flattened in order)."""
    if targets is None:
        return []
    if isinstance(targets, Mapping):
        return [socket for group in targets.values() for socket in _socket_list(group)]
    return [targets] if isinstance(targets, str) else list(targets)


def instantiate_component(cfg: DictConfig | Mapping[str, Any], key: str, resources: Mapping[str, Any]) -> Any:
    """Builds one component from `_target_` + params; used by the builder and for stand-alone stores."""
    return _instantiate(_to_container(cfg, key), key, dict(resources))


def _to_container(spec: DictConfig | Mapping[str, Any], key: str) -> dict[str, Any]:
    if isinstance(spec, DictConfig | ListConfig):
        try:
            return OmegaConf.to_container(spec, resolve=True)  # type: ignore[return-value]
        except Exception as e:  # interpolation and resolver errors already name the full key
            raise PipelineConfigError(f"{key}: {e}") from e
    return dict(spec)


def _is_none(cfg: Any) -> bool:
    if isinstance(cfg, Mapping):
        return "_target_" in cfg and cfg["_target_"] in NONE_VALUES
    return cfg in NONE_VALUES


def _parse_socket(value: Any, where: str) -> Socket:
    if not isinstance(value, str) or value.count(".") != 1 or not all(value.split(".")):
        raise PipelineConfigError(f"{where}: expected 'component.socket', got {value!r}")
    component, name = value.split(".")
    return Socket(component, name)


def _parse_connection(value: Any, where: str) -> tuple[Socket, Socket]:
    if isinstance(value, Mapping) and set(value) == {"from", "to"}:
        value = [value["from"], value["to"]]
    if not isinstance(value, Sequence) or isinstance(value, str) or len(value) != 2:
        raise PipelineConfigError(f"{where}: expected [sender.socket, receiver.socket], got {value!r}")
    return _parse_socket(value[0], where), _parse_socket(value[1], where)


def _referenced_components(
    connections: list[tuple[Socket, Socket]], inputs: dict[str, list[Socket]], key: str
) -> list[tuple[str, Socket]]:
    refs = [(f"{key}.connections[{i}]", s) for i, pair in enumerate(connections) for s in pair]
    return refs + [(f"{key}.inputs.{name}", s) for name, sockets in inputs.items() for s in sockets]


def _locate(target: Any, where: str) -> Any:
    """Imports the longest module prefix of a dotted path, then walks attributes (e.g. `...Secret.from_env_var`)."""
    if not isinstance(target, str) or "." not in target:
        raise PipelineConfigError(f"{where}._target_: expected a dotted import path, got {target!r}")
    parts = target.split(".")
    not_found: ModuleNotFoundError | None = None
    for cut in range(len(parts) - 1, 0, -1):
        module_name = ".".join(parts[:cut])
        try:
            obj = importlib.import_module(module_name)
        except ModuleNotFoundError as e:
            if e.name is None or not module_name.startswith(e.name):  # the module exists but its import failed
                raise PipelineConfigError(f"{where}._target_: cannot import module '{module_name}': {e}") from e
            not_found = not_found or e
            continue
        except ImportError as e:
            raise PipelineConfigError(f"{where}._target_: cannot import module '{module_name}': {e}") from e
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                if not_found is not None:
                    raise PipelineConfigError(
                        f"{where}._target_: cannot import module '{'.'.join(parts[:-1])}': {not_found}"
                    )
                raise PipelineConfigError(f"{where}._target_: '{module_name}' has no '{'.'.join(parts[cut:])}'")
            obj = getattr(obj, attr)
        return obj
    raise PipelineConfigError(f"{where}._target_: cannot import module '{parts[0]}'")


def _instantiate(cfg: Any, where: str, resources: dict[str, Any]) -> Any:
    if not isinstance(cfg, Mapping) or "_target_" not in cfg:
        raise PipelineConfigError(f"{where}: expected a mapping with '_target_' (or 'none'), got {cfg!r}")
    target = _locate(cfg["_target_"], where)
    params = {
        k: _types(v, f"{where}.{k}") if k in TYPE_KEYS else _resolve_value(v, f"{where}.{k}", resources)
        for k, v in cfg.items()
        if k != "_target_"
    }
    params = _check_params(target, params, where)
    try:
        return target(**params)
    except UserError:  # it names the key at fault itself
        raise
    except Exception as e:
        raise PipelineConfigError(f"{where}: {cfg['_target_']} rejected its parameters: {e}") from e


def _resolve_value(value: Any, where: str, resources: dict[str, Any]) -> Any:
    if isinstance(value, str) and value.startswith("@"):
        name = value[1:]
        if name not in resources:
            raise PipelineConfigError(f"{where}: unknown resource '{value}'; available: {sorted(resources)}")
        return resources[name]
    if isinstance(value, Mapping) and "_target_" in value:
        return _instantiate(value, where, resources)
    if isinstance(value, Mapping):
        return {
            k: _types(v, f"{where}.{k}") if k in TYPE_KEYS else _resolve_value(v, f"{where}.{k}", resources)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_resolve_value(v, f"{where}[{i}]", resources) for i, v in enumerate(value)]
    return value


def _check_params(target: Any, params: dict[str, Any], where: str) -> dict[str, Any]:
    """Rejects unknown, missing and mistyped params; turns type names into types where a type is expected."""
    function = target.__init__ if inspect.isclass(target) else target  # @component hides the class signature
    try:
        signature = inspect.signature(function)
        hints = typing.get_type_hints(function)
    except (TypeError, ValueError, NameError):
        return params
    params = {
        name: _as_type(value, f"{where}.{name}") if _expects_type(hints.get(name)) and isinstance(value, str) else value
        for name, value in params.items()
    }
    accepted = {
        n: p
        for i, (n, p) in enumerate(signature.parameters.items())
        if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and not (i == 0 and inspect.isclass(target))
    }
    takes_kwargs = any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values())
    for name, value in params.items():
        if name not in accepted:
            if not takes_kwargs:
                raise PipelineConfigError(
                    f"{where}.{name}: unknown parameter of {getattr(target, '__name__', target)}; "
                    f"valid: {sorted(accepted)}"
                )
            continue
        if name in hints and not _matches(value, hints[name]):
            raise PipelineConfigError(
                f"{where}.{name}: expected {_type_name(hints[name])}, got {type(value).__name__} {value!r}"
            )
    missing = [
        n for n, p in accepted.items() if p.default is p.empty and n not in params and p.kind is not p.POSITIONAL_ONLY
    ]
    if missing:
        raise PipelineConfigError(f"{where}: missing required parameter(s) {missing}")
    return params


def _expects_type(annotation: Any) -> bool:
    return annotation is type or typing.get_origin(annotation) is type


def _types(value: Any, where: str) -> Any:
    """A type name, or a list of them (a ConditionalRouter route with several outputs), as types."""
    if isinstance(value, str):
        return _as_type(value, where)
    if isinstance(value, list):
        return [_types(v, f"{where}[{i}]") for i, v in enumerate(value)]
    return value


def _as_type(value: str, where: str) -> Any:
    try:
        return deserialize_type(value)
    except Exception as e:
        raise PipelineConfigError(f"{where}: {value!r} is not a type Haystack can deserialize: {e}") from e


def _matches(value: Any, annotation: Any) -> bool:
    """Checks plain config values against simple annotations; anything richer is left to the component."""
    origin = typing.get_origin(annotation)
    if annotation is Any or isinstance(annotation, typing.TypeVar):
        return True
    if origin in (typing.Union, types.UnionType):
        return any(_matches(value, arg) for arg in typing.get_args(annotation))
    if origin is typing.Literal:
        return value in typing.get_args(annotation)
    if annotation is type(None):
        return value is None
    if annotation is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if annotation is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if _expects_type(annotation):
        return isinstance(value, type) or typing.get_origin(value) is not None
    if annotation in (str, bool):
        return isinstance(value, annotation)
    if origin in (list, Sequence) or annotation is list:
        return isinstance(value, list | tuple)
    if origin in (dict, Mapping) or annotation is dict:
        return isinstance(value, Mapping)
    return True


def _type_name(annotation: Any) -> str:
    return getattr(annotation, "__name__", None) or str(annotation).replace("typing.", "")


def _pass_through(
    name: str,
    connections: list[tuple[Socket, Socket]],
    inputs: dict[str, list[Socket]],
    instances: dict[str, Any],
    key: str,
) -> PassThrough:
    """A `none` slot keeps the sockets its neighbours use: each input comes out under the same name."""
    socket_types: dict[str, str] = {}
    for sender, receiver in connections:
        if receiver.component == name:
            sockets = instances[sender.component].__haystack_output__._sockets_dict
            if sender.name not in sockets:
                raise PipelineConfigError(
                    f"{key}.connections: {sender.component} has no output '{sender.name}'; outputs: {sorted(sockets)}"
                )
            socket_types[receiver.name] = serialize_type(sockets[sender.name].type)
    for sockets in inputs.values():
        for socket in sockets:
            if socket.component == name:  # fed by a pipeline input: typed like a built receiver of its output
                socket_types.setdefault(socket.name, serialize_type(_receiver_type(name, socket.name, connections, instances)))
    for sender, receiver in connections:
        if sender.component == name and sender.name not in socket_types:
            raise PipelineConfigError(
                f"{key}.components.{name}: is 'none' (a pass-through), so its output '{sender.name}' "
                f"(used by {receiver}) needs an input of the same name; its inputs: {sorted(socket_types)}"
            )
    return PassThrough(sockets=socket_types)


def _receiver_type(name: str, socket: str, connections: list[tuple[Socket, Socket]], instances: dict[str, Any]) -> Any:
    for sender, receiver in connections:
        if (sender.component, sender.name) == (name, socket) and receiver.component in instances:
            receiving = instances[receiver.component].__haystack_input__._sockets_dict
            if receiver.name in receiving:
                return receiving[receiver.name].type
    return Any


def _check_socket(pipeline: Pipeline, socket: Socket, kind: str, where: str, must_be_documents: bool = False) -> None:
    if socket.component not in pipeline.graph.nodes:
        raise PipelineConfigError(f"{where}: unknown component '{socket.component}'; components: {sorted(pipeline.graph.nodes)}")
    instance = pipeline.get_component(socket.component)
    sockets = (instance.__haystack_output__ if kind == "output" else instance.__haystack_input__)._sockets_dict
    if socket.name not in sockets:
        raise PipelineConfigError(
            f"{where}: component '{socket.component}' ({type(instance).__name__}) has no {kind} '{socket.name}'; "
            f"{kind}s: {sorted(sockets)}"
        )
    if must_be_documents and not _is_list_of(sockets[socket.name].type, Document):
        raise PipelineConfigError(f"{where}: {socket} is {sockets[socket.name].type}, expected list[Document]")


def _is_list_of(annotation: Any, item: type) -> bool:
    return typing.get_origin(annotation) is list and typing.get_args(annotation) == (item,)


def _stage_views(pipeline: Pipeline) -> dict[str, Socket]:
    """`stage/<component>` per `list[Document]` output in topological order (`stage/<component>.<socket>` when a
    component has several, e.g. a router's branches). A `none` slot is a stage too, repeating its upstream one, so
    an ablation and its baseline share the slot's metrics, question by question."""
    found = {}
    carried = _loop_carried(pipeline)
    for name in _topological(pipeline):
        instance = pipeline.get_component(name)
        sockets = [
            s
            for s, socket in instance.__haystack_output__._sockets_dict.items()
            if _is_list_of(socket.type, Document) and (name, s) not in carried
        ]
        for socket_name in sockets:
            view = f"{STAGE_PREFIX}{name}" if len(sockets) == 1 else f"{STAGE_PREFIX}{name}.{socket_name}"
            found[view] = Socket(name, socket_name)
    return found


def _loop_carried(pipeline: Pipeline) -> set[tuple[str, str]]:
    """Outputs that only go round a loop (e.g. the self-check's retry context): the same documents as the stage
    that entered the loop, and empty on questions that never loop, so they are no stage of their own."""
    cycle = {node: i for i, nodes in enumerate(networkx.strongly_connected_components(pipeline.graph)) for node in nodes}
    receivers: dict[tuple[str, str], list[bool]] = {}
    for sender, receiver, data in pipeline.graph.edges(data=True):
        receivers.setdefault((sender, data["from_socket"].name), []).append(cycle[sender] == cycle[receiver])
    return {output for output, in_loop in receivers.items() if all(in_loop)}


def _topological(pipeline: Pipeline) -> list[str]:
    """Components in data-flow order; a loop's members stay together, in insertion order, where it is entered."""
    graph = pipeline.graph
    if networkx.is_directed_acyclic_graph(graph):
        return list(networkx.topological_sort(graph))
    position = {name: i for i, name in enumerate(graph.nodes)}
    condensed = networkx.condensation(graph)
    return [
        name
        for group in networkx.topological_sort(condensed)
        for name in sorted(condensed.nodes[group]["members"], key=position.__getitem__)
    ]
