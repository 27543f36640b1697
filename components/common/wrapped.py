"""The one way a component that wraps other components is rebuilt: each wrapped part from its own `to_dict()`."""

from typing import Any

from haystack.utils import deserialize_component_inplace


def wrapped_init_parameters(data: dict[str, Any], *keys: str) -> dict[str, Any]:
    """`data`'s init parameters, the component under each of `keys` rebuilt from its type (None stays None)."""
    params = dict(data["init_parameters"])
    for key in keys:
        if params.get(key) is not None:
            deserialize_component_inplace(params, key=key)
    return params
