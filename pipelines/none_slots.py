"""A `none` slot in a spec (an ablation that drops a component) becomes a PassThrough with the sockets its
neighbours use, so the rest of the graph is wired as in the baseline."""

from __future__ import annotations

from typing import Any

from haystack.utils.type_serialization import serialize_type

from components.common.pass_through import PassThrough
from pipelines.haystack_compat import input_sockets, output_sockets
from pipelines.spec import PipelineConfigError, Socket


def add_pass_throughs(
    slots: list[str],
    connections: list[tuple[Socket, Socket]],
    inputs: dict[str, list[Socket]],
    instances: dict[str, Any],
    key: str,
) -> None:
    """Adds a PassThrough to `instances` per `none` slot; a slot takes its socket types from its senders, so
    senders come first."""
    pending = list(slots)
    while pending:
        ready = [n for n in pending if all(s.component in instances for s, r in connections if r.component == n)]
        if not ready:
            raise PipelineConfigError(f"{key}.components: the 'none' slots {pending} feed each other in a loop")
        for name in ready:
            instances[name] = _pass_through(name, connections, inputs, instances, key)
            pending.remove(name)


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
            sockets = output_sockets(instances[sender.component])
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
            receiving = input_sockets(instances[receiver.component])
            if receiver.name in receiving:
                return receiving[receiver.name].type
    return Any
