"""What a pipeline spec (YAML data) says, and how its shorthands become plain components, connections and inputs.

A spec has `components` (`_target_` + init params, or `none`), `connections` (`[sender.socket, receiver.socket]`,
as one list or as named lists, so that a config extending another adds a group instead of copying the list),
and the contract with evaluation and serving:
- `inputs` map golden fields (`question`, `history`, `filters`) to the sockets that receive them (a list, or
  named lists like `connections`, so that an extending config adds a group);
- `retrieval_output` and `context_output` are the headline views (`retrieval/`, `context/`); `views` names more
  (`name: component.socket`), and every `list[Document]` output is also scored as `stage/<component>`;
- `route` names a component (e.g. a ConditionalRouter) whose fired output is recorded per question;
- `grader` names a component (components.crag.crag_evaluator.CRAGEvaluator) whose `label` and `graded` outputs are
  recorded per question;
- `answer_branches` names more answer sockets for branches that answer without the answer stage (an honest
  refusal); per question the answer stage's answer is read first, then these;
- `question_from` puts a rewriting component first: every socket under `inputs.question` receives its output
  instead, and the question goes to its own `question` input (evaluation reads its `queries`/`fallback` outputs);
- `queries_from` (`{socket, question, paths}`, optionally `filters` and `query`) puts an expanding component
  first (e.g. Haystack's QueryExpander): the question goes to the socket named by `question`, and each retrieval
  path named under `paths` runs once per query of the `socket` output (components.retrievers.multi_query_retriever), a dense
  path together with the embedder in front of it; `query` feeds the paths' question from a socket instead of the
  pipeline input (a router's branch, so that nothing is retrieved on a route that does not retrieve).
- `path_guards` (`{joiner, paths}`) runs every path feeding the fusion joiner guarded, so that one that fails or
  times out is dropped for the request (pipelines/path_guards.py); `degraded_output` names the socket that says
  which were dropped when the guarded paths are not this spec's own (the agent's, whose kb_search runs them);
- `model_slots` (`slot: {section, component}`) says which component runs the chat model that the config section
  `section` names (its `model` and `endpoint`): each run records it as `ragtune.model.<slot>`, and serving checks
  it again.
An optional `answer` stage (the `answer` config group) is merged in: its components and connections join the
graph, its `context` input is fed from the pipeline's `context_output`, and it names the `answer_output`, whose
component must declare the answer contract (pipelines/answer_contract.py).
Every error names the spec key at fault. pipelines/builder.py builds the desugared spec.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from enum import Enum
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf

from pipelines.errors import UserError

QUERIES_FROM_KEYS = ("socket", "question", "paths")
# Optional: `filters`, the expander's filters input; `query`, the socket that feeds each path's `query` (default:
# the pipeline's question; a router's branch, so that a path runs only on the routes that retrieve).
QUERIES_FROM_OPTIONAL = ("filters", "query")
MULTI_QUERY = "components.retrievers.multi_query_retriever.MultiQueryRetriever"
PER_QUERY_INPUTS = ("query_embedding", "filters")  # what a wrapped path may receive from other components
ANSWER_KEYS = {"components", "connections", "inputs", "context_output", "answer_output", "description"}
# The answer stage's input that receives the retrieval pipeline's context documents.
CONTEXT_INPUT = "context"
# Pipeline inputs are golden fields: evaluation feeds each item's field to the sockets named under it.
GOLDEN_INPUTS = ("question", "history", "filters")
NONE_VALUES = {None, "none", "None", "null"}


@dataclass
class PipelineSpec:
    """The `pipeline` config group as a record: what each key holds is described at the top of this module. The
    builder desugars `to_mapping()`, so a spec written by hand (a test's, a subpipeline) builds the same way."""

    name: str | None = None
    description: str | None = None
    components: dict[str, Any] = field(default_factory=dict)
    connections: Any = None
    inputs: Any = None
    retrieval_output: str | None = None
    context_output: str | None = None
    answer: Any = None
    answer_output: str | None = None
    views: dict[str, str] | None = None
    route: str | None = None
    grader: str | None = None
    answer_branches: Any = None
    question_from: str | None = None
    queries_from: Any = None
    max_runs_per_component: int = 100
    model_slots: Any = None
    subpipelines: Any = None
    path_guards: Any = None
    degraded_output: str | None = None

    def to_mapping(self) -> dict[str, Any]:
        """The keys that are set, as the builder reads them."""
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}


# The keys a spec may have: PipelineSpec's fields.
SPEC_KEYS = frozenset(f.name for f in fields(PipelineSpec))


class PipelineConfigError(UserError, ValueError):
    """A pipeline spec that cannot be built; the message names the key at fault."""


@dataclass(frozen=True)
class ModelSlot:
    """A component's role as an LLM slot: the config section naming its chat model, and the component."""

    section: str
    component: str


@dataclass(frozen=True)
class Socket:
    """A `component.socket` the spec names; `str()` gives it back in the form `Pipeline.connect` takes."""

    component: str
    name: str

    def __str__(self) -> str:
        return f"{self.component}.{self.name}"


def to_container(spec: PipelineSpec | Mapping[str, Any], key: str) -> dict[str, Any]:
    """Plain data, choices (a config record's Enums) as their strings: components and their to_dict see no Enum."""
    if isinstance(spec, PipelineSpec):
        return plain(spec.to_mapping())
    if isinstance(spec, DictConfig | ListConfig):
        try:
            return OmegaConf.to_container(spec, resolve=True, enum_to_str=True)  # type: ignore[return-value]
        except Exception as e:  # interpolation and resolver errors already name the full key
            raise PipelineConfigError(f"{key}: {e}") from e
    return plain(dict(spec))


def plain(value: Any) -> Any:
    """`value` with every Enum replaced by its value, in nested dicts and lists too."""
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, DictConfig | ListConfig):
        return OmegaConf.to_container(value, resolve=True, enum_to_str=True)
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(plain(v) for v in value)
    return value


def is_none(cfg: Any) -> bool:
    if isinstance(cfg, Mapping):
        return "_target_" in cfg and cfg["_target_"] in NONE_VALUES
    return cfg in NONE_VALUES


def parse_socket(value: Any, where: str) -> Socket:
    if not isinstance(value, str) or value.count(".") != 1 or not all(value.split(".")):
        raise PipelineConfigError(f"{where}: expected 'component.socket', got {value!r}")
    component, name = value.split(".")
    return Socket(component, name)


def parse_connection(value: Any, where: str) -> tuple[Socket, Socket]:
    if isinstance(value, Mapping) and set(value) == {"from", "to"}:
        value = [value["from"], value["to"]]
    if not isinstance(value, Sequence) or isinstance(value, str) or len(value) != 2:
        raise PipelineConfigError(f"{where}: expected [sender.socket, receiver.socket], got {value!r}")
    return parse_socket(value[0], where), parse_socket(value[1], where)


def referenced_components(
    connections: list[tuple[Socket, Socket]], inputs: dict[str, list[Socket]], key: str
) -> list[tuple[str, Socket]]:
    refs = [(f"{key}.connections[{i}]", s) for i, pair in enumerate(connections) for s in pair]
    return refs + [(f"{key}.inputs.{name}", s) for name, sockets in inputs.items() for s in sockets]


def parse_inputs(value: Any, key: str, names: Sequence[str] | None) -> dict[str, list[Socket]]:
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
        name: [parse_socket(s, f"{key}.inputs.{name}") for s in socket_list(targets)]
        for name, targets in value.items()
        if targets
    }


def flat_connections(spec: dict[str, Any], key: str) -> dict[str, Any]:
    """Named connection groups (`{retrieve: [...], compress: [...]}`) become one list, groups in order."""
    groups = spec.get("connections")
    if isinstance(groups, Mapping):
        for name, group in groups.items():
            if not isinstance(group, list):
                raise PipelineConfigError(f"{key}.connections.{name}: expected a list of [sender, receiver] pairs")
        spec = spec | {"connections": [pair for group in groups.values() for pair in group]}
    return spec


def with_question_from(spec: dict[str, Any], key: str) -> dict[str, Any]:
    """`question_from: rewriter.question`: the rewriter takes the question, every former receiver takes its output."""
    source = spec.get("question_from")
    if source is None:
        return spec
    socket = parse_socket(source, f"{key}.question_from")
    inputs = {name: socket_list(targets) for name, targets in (spec.get("inputs") or {}).items()}
    targets = [t for t in inputs.get("question", []) if parse_socket(t, f"{key}.inputs.question").component != socket.component]
    if not targets:
        raise PipelineConfigError(f"{key}.question_from: inputs.question names no socket to feed from {source}")
    inputs["question"] = [f"{socket.component}.question"]
    return spec | {"inputs": inputs, "connections": [*(spec.get("connections") or []), *([source, t] for t in targets)]}


def with_queries_from(spec: dict[str, Any], key: str) -> dict[str, Any]:
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
    path_query = parse_socket(value["query"], f"{where}.query") if value.get("query") else None
    source = parse_socket(value["socket"], f"{where}.socket")
    question = parse_socket(value["question"], f"{where}.question")
    paths = value["paths"]
    if not isinstance(paths, list) or not paths:
        raise PipelineConfigError(f"{where}.paths: expected a non-empty list of retriever component names")
    components = dict(spec.get("components") or {})
    connections = [parse_connection(c, f"{key}.connections[{i}]") for i, c in enumerate(spec.get("connections") or [])]
    inputs = {name: socket_list(targets) for name, targets in (spec.get("inputs") or {}).items()}
    questions = [parse_socket(t, f"{key}.inputs.question") for t in inputs.get("question", [])]
    for i, path in enumerate(paths):
        at = f"{where}.paths[{i}]"
        if path not in components or is_none(components[path]):
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
        inputs["filters"] = [*inputs.get("filters", []), str(parse_socket(value["filters"], f"{where}.filters"))]
    return spec | {
        "components": components,
        "connections": [[str(s), str(r)] for s, r in connections],
        "inputs": inputs,
    }


def with_answer_stage(spec: dict[str, Any], key: str) -> dict[str, Any]:
    """Merges the `answer` stage into the retrieval spec; its `context` input hangs off `context_output`."""
    stage = spec.pop("answer", None)
    if is_none(stage):
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
    context_targets = socket_list(stage_inputs.pop(CONTEXT_INPUT, []))
    merged["connections"] = [
        *(spec.get("connections") or []),
        *([spec["context_output"], target] for target in context_targets),
        *(stage.get("connections") or []),
    ]
    inputs = {name: socket_list(targets) for name, targets in (spec.get("inputs") or {}).items()}
    for name, targets in stage_inputs.items():
        inputs.setdefault(name, []).extend(socket_list(targets))
    merged["inputs"] = inputs
    merged["context_output"] = stage.get("context_output") or spec["context_output"]
    merged["answer_output"] = stage["answer_output"]
    return merged


def socket_list(targets: Any) -> list[Any]:
    """An input's receiving sockets: YAML may give one socket as a plain string, none as null, or named groups
    (`{retrieve: [...], crag: [...]}`, flattened in order)."""
    if targets is None:
        return []
    if isinstance(targets, Mapping):
        return [socket for group in targets.values() for socket in socket_list(group)]
    return [targets] if isinstance(targets, str) else list(targets)


def rewriting_component(spec: Mapping[str, Any]) -> str | None:
    """The component whose outputs are the rewrite: the `question_from` one, else the `queries_from` expander's
    (`<expander>.queries`; a joiner of several routes' queries, as in adaptive, is no single rewriter)."""
    if spec.get("question_from"):
        return str(spec["question_from"]).split(".")[0]
    source = str((spec.get("queries_from") or {}).get("socket") or "")
    return source.split(".")[0] if source.endswith(".queries") else None


def parse_model_slots(value: Any, key: str, components: Mapping[str, Any]) -> dict[str, ModelSlot]:
    """`model_slots`, checked; a spec without them declares no slot."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise PipelineConfigError(f"{key}.model_slots: expected a mapping slot -> {{section, component}}")
    slots = {}
    for slot, entry in value.items():
        where = f"{key}.model_slots.{slot}"
        if not isinstance(entry, Mapping) or set(entry) != {"section", "component"}:
            raise PipelineConfigError(f"{where}: expected {{section: CONFIG.KEY, component: NAME}}, got {entry!r}")
        if entry["component"] not in components:
            raise PipelineConfigError(
                f"{where}.component: unknown component {entry['component']!r}; components: {sorted(components)}"
            )
        slots[str(slot)] = ModelSlot(str(entry["section"]), str(entry["component"]))
    return slots
