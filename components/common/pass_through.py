"""The component a pipeline slot becomes when it is set to `none`."""

from typing import Any

from haystack import component, default_from_dict, default_to_dict
from haystack.core.errors import DeserializationError
from haystack.utils.type_serialization import deserialize_type


@component
class PassThrough:
    """
    Hands every input on unchanged under the same name, so an ablated slot keeps the graph's sockets.

    ### Usage example
    ```python
    skip = PassThrough(sockets={"documents": "list[haystack.dataclasses.document.Document]"})
    skip.run(documents=docs)  # {"documents": docs}
    ```
    """

    def __init__(self, sockets: dict[str, str]) -> None:
        """
        :param sockets: Socket name -> serialised type (as written by `haystack.utils.serialize_type`); each
            name becomes an optional input and an output of that type.
        """
        if not sockets:
            raise ValueError("sockets must name at least one socket")
        types = {}
        for name, type_name in sockets.items():
            try:
                types[name] = deserialize_type(type_name)
            except DeserializationError as error:
                raise ValueError(f"sockets[{name!r}]: cannot resolve type {type_name!r}: {error}") from error
            component.set_input_type(self, name, types[name], default=None)
        component.set_output_types(self, **types)
        self.sockets = dict(sockets)

    def to_dict(self) -> dict[str, Any]:
        """Serialise the component."""
        return default_to_dict(self, sockets=self.sockets)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "PassThrough":
        """Deserialise the component."""
        return default_from_dict(cls, data)

    def run(self, **kwargs: Any) -> dict[str, Any]:
        """Return the inputs that were given (not None) under their own names."""
        return {name: kwargs[name] for name in self.sockets if kwargs.get(name) is not None}
