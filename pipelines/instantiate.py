"""A component from its config: locate `_target_`, resolve `@resource` and nested `_target_` params, and check the
params against the target's signature before calling it, so that a mistake names its key instead of failing later."""

from __future__ import annotations

import importlib
import inspect
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any

from haystack.utils.type_serialization import deserialize_type

from pipelines.errors import UserError
from pipelines.spec import PipelineConfigError, to_container

# Params that Haystack components expect as Python types (BranchJoiner, OutputAdapter, ConditionalRouter routes);
# YAML gives their names.
TYPE_KEYS = {"output_type", "type_"}


def instantiate_component(cfg: Mapping[str, Any], key: str, resources: Mapping[str, Any]) -> Any:
    """Builds one component from `_target_` + params; used by the builder and for stand-alone stores."""
    return instantiate(to_container(cfg, key), key, dict(resources))


def locate(target: Any, where: str) -> Any:
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


def instantiate(cfg: Any, where: str, resources: dict[str, Any]) -> Any:
    if not isinstance(cfg, Mapping) or "_target_" not in cfg:
        raise PipelineConfigError(f"{where}: expected a mapping with '_target_' (or 'none'), got {cfg!r}")
    target = locate(cfg["_target_"], where)
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
        return instantiate(value, where, resources)
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
