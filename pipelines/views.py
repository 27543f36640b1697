"""Checks of the sockets a spec names, and the views derived from a wired pipeline: which outputs evaluation scores,
under which names (the headline views, the spec's own, then one stage per `list[Document]` output)."""

from __future__ import annotations

import typing
from collections.abc import Mapping
from typing import Any

import networkx
from haystack import Document, Pipeline
from haystack.dataclasses import GeneratedAnswer

from components.answer.answer_meta import REQUIRED_KEYS
from pipelines.answer_contract import DECLARATION, missing_declaration
from pipelines.haystack_compat import input_sockets, output_sockets
from pipelines.spec import PipelineConfigError, Socket, parse_socket

HEADLINE_VIEWS = ("retrieval", "context")
STAGE_PREFIX = "stage/"


def pipeline_views(pipeline: Pipeline, spec: Mapping[str, Any], key: str) -> dict[str, Socket]:
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
        socket = parse_socket(target, where)
        check_socket(pipeline, socket, "output", where, must_be_documents=True)
        views[view] = socket
    return views | _stage_views(pipeline)


def check_answer_output(pipeline: Pipeline, socket: Socket, where: str) -> None:
    check_socket(pipeline, socket, "output", where)
    instance = pipeline.get_component(socket.component)
    annotation = output_sockets(instance)[socket.name].type
    if not _is_list_of(annotation, GeneratedAnswer):
        raise PipelineConfigError(f"{where}: {socket} is {annotation}, expected list[GeneratedAnswer]")
    missing = missing_declaration(instance)
    if missing:
        raise PipelineConfigError(
            f"{where}: {type(instance).__name__} does not declare the answer contract (meta {', '.join(REQUIRED_KEYS)}; "
            f"missing {missing} in its `{DECLARATION}`), so refusals and citations would read as absent. End the "
            f"answer stage with components.answer.citation_verifier.CitationVerifier, or declare `{DECLARATION}` on a "
            "component that fills them (pipelines/answer_contract.py)"
        )


def check_socket(pipeline: Pipeline, socket: Socket, kind: str, where: str, must_be_documents: bool = False) -> None:
    if socket.component not in pipeline.graph.nodes:
        raise PipelineConfigError(f"{where}: unknown component '{socket.component}'; components: {sorted(pipeline.graph.nodes)}")
    instance = pipeline.get_component(socket.component)
    sockets = output_sockets(instance) if kind == "output" else input_sockets(instance)
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
            for s, socket in output_sockets(instance).items()
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
