"""Every use of Haystack internals, in one module, so that a Haystack upgrade is checked here and nowhere else.

Components keep their sockets in `__haystack_input__` / `__haystack_output__`, which Haystack 3.4 has no public
accessor for; `input_sockets` and `output_sockets` read them.

The fast copy: `Pipeline.run` copies data with `_deepcopy_with_exceptions`, which runs `isinstance(x, Component)`,
a runtime-checkable Protocol check costing tens of microseconds, on every element, including each of the 384
floats of a query embedding. At 100k chunks that doubled hybrid retrieval latency (p50 38 -> 23 ms, p95 52 -> 29 ms
measured with benchmarks/bench_retrieval.py). Immutable scalars need no copy and a list of them only a shallow one,
so the result is the same; anything else still goes through Haystack's function. `install_fast_copy` replaces
that private function, so it first checks that the installed Haystack is the one this was tested with.

`run_tool` is the Agent's own tool execution (`_run_tool`: the tool's state inputs injected, its `outputs_to_state`
merged, its result turned into a tool message by `outputs_to_string`), which Haystack 3.4 has no public form of:
the agent's floor search (pipelines/agent_floor.py) runs through it, so it is scoped and recorded exactly as the
model's own calls are.
"""

from __future__ import annotations

from typing import Any

import haystack
import haystack.core.pipeline.base as pipeline_base
import haystack.core.pipeline.pipeline as pipeline_module
from haystack.components.agents.tool_calling import _run_tool
from haystack.core.component.types import InputSocket, OutputSocket
from haystack.core.pipeline import utils

from pipelines.errors import UserError

# The haystack-ai major.minor whose internals this module was written against (pyproject.toml pins its patch).
TESTED_HAYSTACK = "3.4"
IMMUTABLE = (int, float, str, bool, bytes, type(None))
_haystack_copy = utils._deepcopy_with_exceptions
run_tool = _run_tool


class HaystackVersionError(UserError, RuntimeError):
    """The installed haystack-ai is not the version whose internals this project reads and patches."""


def check_haystack_version() -> None:
    """Refuses a haystack-ai whose major.minor differs from TESTED_HAYSTACK: its internals may have moved."""
    installed = haystack.__version__
    if ".".join(installed.split(".")[:2]) != TESTED_HAYSTACK:
        raise HaystackVersionError(
            f"haystack-ai {installed} is installed, but ragtune is tested with haystack-ai {TESTED_HAYSTACK}.x "
            "(pipelines/haystack_compat.py uses its internals); install the version pinned in pyproject.toml"
        )


def is_component(obj: Any) -> bool:
    """Whether `obj` is a Haystack component instance: @component gives each one its sockets."""
    return hasattr(obj, "__haystack_input__")


def input_sockets(instance: Any) -> dict[str, InputSocket]:
    """A component's input sockets by name: its `run` parameters plus any set with `set_input_types`."""
    return instance.__haystack_input__._sockets_dict


def output_sockets(instance: Any) -> dict[str, OutputSocket]:
    """A component's output sockets by name: its `@component.output_types` or `set_output_types`."""
    return instance.__haystack_output__._sockets_dict


def fast_deepcopy(obj: Any) -> Any:
    kind = type(obj)
    if kind in IMMUTABLE:
        return obj
    if kind is list:
        if all(type(v) in IMMUTABLE for v in obj):
            return list(obj)
        return [fast_deepcopy(v) for v in obj]
    if kind is dict:
        return {k: fast_deepcopy(v) for k, v in obj.items()}
    return _haystack_copy(obj)


def install_fast_copy() -> None:
    """Points the modules that copy pipeline data at the fast path (idempotent), on the tested Haystack only."""
    check_haystack_version()
    pipeline_base._deepcopy_with_exceptions = fast_deepcopy
    pipeline_module._deepcopy_with_exceptions = fast_deepcopy
