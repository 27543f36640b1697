"""The one place where a pipeline spec (YAML data) becomes a `haystack.Pipeline`: desugar it (pipelines/spec.py),
instantiate its components (pipelines/instantiate.py) and `none` slots (pipelines/none_slots.py), connect them,
check the sockets it names and derive its views (pipelines/views.py), all before any component does work.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from haystack import Pipeline
from haystack.core.errors import PipelineConnectError

from components.common import llama_log
from pipelines import haystack_compat
from pipelines.built import BuiltPipeline
from pipelines.instantiate import instantiate, locate
from pipelines.none_slots import add_pass_throughs
from pipelines.path_guards import DEGRADED, with_path_guards
from pipelines.spec import (
    GOLDEN_INPUTS,
    SPEC_KEYS,
    PipelineConfigError,
    PipelineSpec,
    Socket,
    flat_connections,
    is_none,
    parse_connection,
    parse_inputs,
    parse_model_slots,
    parse_socket,
    referenced_components,
    rewriting_component,
    socket_list,
    to_container,
    with_answer_stage,
    with_queries_from,
    with_question_from,
)
from pipelines.views import check_answer_output, check_socket, pipeline_views


def build_pipeline(
    spec: PipelineSpec | Mapping[str, Any],
    resources: Mapping[str, Any] | None = None,
    key: str = "pipeline",
    input_names: Sequence[str] | None = None,
) -> BuiltPipeline:
    """Validates `spec` and builds the pipeline. `resources` fill `"@name"` init params (e.g. `@store`);
    `input_names` restricts the inputs (evaluated pipelines take golden fields: GOLDEN_INPUTS, with `question`)."""
    haystack_compat.install_fast_copy()  # before any pipeline built here runs; idempotent
    spec = with_answer_stage(flat_connections(to_container(spec, key), key), key)
    spec = with_question_from(with_path_guards(with_queries_from(spec, key), key), key)
    unknown = set(spec) - SPEC_KEYS
    if unknown:
        raise PipelineConfigError(f"{key}: unknown key(s) {sorted(unknown)}; allowed: {sorted(SPEC_KEYS)}")
    components_spec = spec.get("components")
    if not isinstance(components_spec, dict) or not components_spec:
        raise PipelineConfigError(f"{key}.components: must be a non-empty mapping of name -> component config")
    connections = [parse_connection(c, f"{key}.connections[{i}]") for i, c in enumerate(spec.get("connections") or [])]
    inputs = parse_inputs(spec.get("inputs"), key, input_names)
    for where, socket in referenced_components(connections, inputs, key):
        if socket.component not in components_spec:
            raise PipelineConfigError(
                f"{where}: unknown component '{socket.component}'; components: {sorted(components_spec)}"
            )

    resources = dict(resources or {})
    for name, sub in _subpipelines(spec, key).items():  # e.g. the retrieval an agent's search tool runs
        resources[f"pipeline.{name}"] = build_pipeline(sub, resources, f"{key}.subpipelines.{name}", GOLDEN_INPUTS)
    instances: dict[str, Any] = {}
    none_slots = [name for name, cfg in components_spec.items() if is_none(cfg)]
    for name, cfg in components_spec.items():
        if name not in none_slots:
            instances[name] = instantiate(cfg, f"{key}.components.{name}", resources)
    add_pass_throughs(none_slots, connections, inputs, instances, key)
    if "llama_cpp" in sys.modules:  # a llama.cpp component was imported: its models load in warm_up, after this
        llama_log.install()

    pipeline = Pipeline(max_runs_per_component=int(spec.get("max_runs_per_component", 100)))
    for name, instance in instances.items():
        pipeline.add_component(name, instance)
    for (sender, receiver), where in zip(
        connections, (f"{key}.connections[{i}]" for i in range(len(connections))), strict=True
    ):
        check_socket(pipeline, sender, "output", where)
        check_socket(pipeline, receiver, "input", where)
        try:
            pipeline.connect(str(sender), str(receiver))
        except PipelineConnectError as e:
            raise PipelineConfigError(f"{where}: cannot connect {sender} -> {receiver}: {e}") from e
    for name, sockets in inputs.items():
        for socket in sockets:
            check_socket(pipeline, socket, "input", f"{key}.inputs.{name}")

    answer_output = None
    if spec.get("answer_output") is not None:
        answer_output = parse_socket(spec["answer_output"], f"{key}.answer.answer_output")
        check_answer_output(pipeline, answer_output, f"{key}.answer.answer_output")
    branches = socket_list(spec.get("answer_branches"))
    if branches and answer_output is None:
        raise PipelineConfigError(f"{key}.answer_branches: a pipeline without an answer stage has no answers to branch")
    answer_branches = tuple(parse_socket(s, f"{key}.answer_branches[{i}]") for i, s in enumerate(branches))
    for i, socket in enumerate(answer_branches):
        check_answer_output(pipeline, socket, f"{key}.answer_branches[{i}]")
    for name in ("route", "grader"):
        if spec.get(name) is not None and spec[name] not in components_spec:
            raise PipelineConfigError(f"{key}.{name}: unknown component {spec[name]!r}; components: {sorted(components_spec)}")

    return BuiltPipeline(
        name=str(spec.get("name", key)),
        pipeline=pipeline,
        inputs=inputs,
        views=pipeline_views(pipeline, spec, key),
        answer_output=answer_output,
        answer_branches=answer_branches,
        route_component=spec.get("route"),
        grader=spec.get("grader"),
        rewriter=rewriting_component(spec),
        model_slots=parse_model_slots(spec.get("model_slots"), key, components_spec),
        degraded_output=degraded_output(pipeline, spec, key),
    )


def degraded_output(pipeline: Pipeline, spec: Mapping[str, Any], key: str) -> Socket | None:
    """Where the pipeline says which retrieval paths it dropped: `degraded_output`, else its own guarded fusion."""
    if spec.get("degraded_output") is not None:
        socket = parse_socket(spec["degraded_output"], f"{key}.degraded_output")
        check_socket(pipeline, socket, "output", f"{key}.degraded_output")
        return socket
    return Socket(spec["path_guards"]["joiner"], DEGRADED) if spec.get("path_guards") else None


def reads_embeddings(spec: PipelineSpec | Mapping[str, Any], key: str = "pipeline") -> bool:
    """Whether a component of the pipeline takes a `query_embedding`: only then does its index need vectors.

    Decided from the config, before the index (whose fingerprint depends on it) exists.
    """
    spec = with_answer_stage(flat_connections(to_container(spec, key), key), key)
    if any(reads_embeddings(sub, f"{key}.subpipelines.{name}") for name, sub in _subpipelines(spec, key).items()):
        return True
    for name, cfg in (spec.get("components") or {}).items():
        if is_none(cfg) or not isinstance(cfg, Mapping):
            continue
        run = getattr(locate(cfg.get("_target_"), f"{key}.components.{name}"), "run", None)
        if callable(run) and "query_embedding" in inspect.signature(run).parameters:
            return True
    return False


def uses_components(spec: PipelineSpec | Mapping[str, Any], prefix: str, key: str = "pipeline") -> bool:
    """Whether a component of the pipeline (or of a subpipeline) is a class under the import path `prefix`."""
    spec = to_container(spec, key)
    if any(uses_components(sub, prefix, f"{key}.subpipelines.{name}") for name, sub in _subpipelines(spec, key).items()):
        return True
    components = (spec.get("components") or {}).values()
    return any(isinstance(cfg, Mapping) and str(cfg.get("_target_", "")).startswith(prefix) for cfg in components)


def _subpipelines(spec: Mapping[str, Any], key: str) -> dict[str, Any]:
    """`subpipelines`: name -> a pipeline spec, built before the components, which take it as `@pipeline.<name>`."""
    subpipelines = spec.get("subpipelines") or {}
    if not isinstance(subpipelines, Mapping):
        raise PipelineConfigError(f"{key}.subpipelines: must be a mapping of name -> pipeline spec")
    return dict(subpipelines)
