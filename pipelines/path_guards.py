"""`path_guards` of a pipeline spec: every retrieval path feeding a fusion joiner runs inside a PathGuard
(components/retrievers/path_guard.py), with its query embedder, so that a path that fails or outlasts its timeout
is dropped for that request instead of failing it (docs/pipelines.md, "Remote embedders and degradation").

`path_guards: {joiner: fusion, paths: {dense: {timeout_s: 2}}}`: `paths` (retriever.paths) sets per-path timeouts;
a path it does not name is guarded without one. Each guarded path keeps its component's name (so its stage view
and timings keep theirs), and its `degraded` output feeds the joiner's, which the built pipeline reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pipelines.spec import PipelineConfigError, Socket, is_none, parse_connection, parse_socket, socket_list

PATH_GUARD = "components.retrievers.path_guard.PathGuard"
KEYS = {"joiner", "paths"}
DEGRADED = "degraded"
# The settings a path may have (retriever.paths.<name>, experiments/runs/settings.py PathSettings).
PATH_KEYS = {"timeout_s"}


def with_path_guards(spec: dict[str, Any], key: str) -> dict[str, Any]:
    """Each path feeding `path_guards.joiner` wrapped in a PathGuard, its query embedder taken inside it."""
    value = spec.get("path_guards")
    if value is None:
        return spec
    where = f"{key}.path_guards"
    if not isinstance(value, Mapping) or not set(value) <= KEYS or "joiner" not in value:
        raise PipelineConfigError(f"{where}: expected {{joiner: NAME, paths: {{path: {{timeout_s: S}}}}}}, got {value!r}")
    components = dict(spec.get("components") or {})
    joiner = value["joiner"]
    if not isinstance(components.get(joiner), Mapping) or is_none(components[joiner]):
        raise PipelineConfigError(f"{where}.joiner: {joiner!r} is not a fusion joiner of this pipeline")
    names = list(components[joiner].get("paths") or [])
    settings = dict(value.get("paths") or {})
    for name, path in settings.items():
        if name not in names:  # the spec's paths are retriever.paths
            raise PipelineConfigError(f"retriever.paths.{name}: no such path; {joiner}'s paths are {names}")
        if not isinstance(path, Mapping) or not set(path) <= PATH_KEYS:
            raise PipelineConfigError(f"retriever.paths.{name}: expected {{timeout_s: S}}, got {path!r}")
    connections = [parse_connection(c, f"{key}.connections[{i}]") for i, c in enumerate(spec.get("connections") or [])]
    inputs = {name: socket_list(targets) for name, targets in (spec.get("inputs") or {}).items()}
    for name in names:
        senders = [s.component for s, r in connections if r == Socket(joiner, name)]
        if len(senders) != 1:
            continue  # a path nothing feeds here (an extending spec removed it) has nothing to guard
        sender = senders[0]
        guard: dict[str, Any] = {"_target_": PATH_GUARD, "path": name, "retriever": components[sender],
                                 "timeout_s": (settings.get(name) or {}).get("timeout_s")}
        embedders = [s.component for s, r in connections if r == Socket(sender, "query_embedding")]
        if embedders:
            embedder = embedders[0]
            if any(s.component == embedder and r.component != sender for s, r in connections):
                raise PipelineConfigError(f"{where}: the embedder {embedder!r} in front of {sender!r} feeds other "
                                          "components too, so it cannot run inside the path")
            guard["query_embedder"] = components.pop(embedder)
            connections = [(s, _redirect(r, embedder, sender)) for s, r in connections if s.component != embedder]
            inputs = {n: [str(_redirect(parse_socket(t, f"{key}.inputs.{n}"), embedder, sender)) for t in targets]
                      for n, targets in inputs.items()}
        components[sender] = guard
        connections.append((Socket(sender, DEGRADED), Socket(joiner, DEGRADED)))
    return spec | {
        "components": components,
        "connections": [[str(s), str(r)] for s, r in connections],
        "inputs": inputs,
    }


def _redirect(socket: Socket, embedder: str, path: str) -> Socket:
    """What fed the embedder's text now feeds the guarded path's `query`."""
    return Socket(path, "query") if socket.component == embedder else socket
