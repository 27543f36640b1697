"""How a component that wraps other components serialises, rebuilds and warms them: each part by its own methods."""

from typing import Any

from haystack import default_to_dict
from haystack.core.serialization import component_to_dict
from haystack.utils import deserialize_component_inplace


def wrapped_init_parameters(data: dict[str, Any], *keys: str) -> dict[str, Any]:
    """`data`'s init parameters, the component under each of `keys` rebuilt from its type (None stays None)."""
    params = dict(data["init_parameters"])
    for key in keys:
        if params.get(key) is not None:
            deserialize_component_inplace(params, key=key)
    return params


def wrapped_to_dict(component: Any, parts: dict[str, Any], **params: Any) -> dict[str, Any]:
    """`component`'s dict: each wrapped part (None stays None) by its own `to_dict()`, then the plain `params`."""
    serialised = {
        name: None if part is None else component_to_dict(part, name) for name, part in parts.items()
    }
    return default_to_dict(component, **serialised, **params)


def warm_up_parts(*parts: Any) -> None:
    """Warm each wrapped part that loads something (an index, a model)."""
    for part in parts:
        if hasattr(part, "warm_up"):
            part.warm_up()
