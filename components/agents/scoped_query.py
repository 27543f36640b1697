"""The first component of an agent's search tool: the model gives the query, the request gives the scope."""

from __future__ import annotations

from typing import Any

from haystack import component, default_from_dict, default_to_dict
from haystack.components.agents.state.state import State

# The Agent state key holding the request's filters (its principal's scope, ANDed with what it asked for).
FILTERS_KEY = "filters"


@component
class ScopedQuery:
    """
    Hands a search pipeline the model's query and the filters of the request the Agent is answering.

    Its `state` input is typed `State`, so Haystack's Agent always injects the live state there, after the model's
    arguments, and leaves it out of the schema the model sees. The model can therefore choose what to search for
    but never whose documents: there is no argument through which it could widen the scope, and a `filters` it
    invents is refused as an unknown argument.

    ### Usage example
    ```python
    search = Pipeline()
    search.add_component("scope", ScopedQuery())
    search.add_component("bm25", InMemoryBM25Retriever(document_store=store))
    search.connect("scope.query", "bm25.query")
    search.connect("scope.filters", "bm25.filters")
    ```
    """

    @component.output_types(query=str, filters=dict[str, Any] | None)
    def run(self, query: str, state: State) -> dict[str, Any]:
        """
        :param query: What the model searches for.
        :param state: The Agent's state; its `filters` key holds the request's scope.
        :returns: The query, and the filters to apply (None only when the request has none).
        """
        if FILTERS_KEY not in state.schema:
            raise ValueError(f"ScopedQuery: the Agent's state_schema must declare '{FILTERS_KEY}' (the request's "
                             f"scope); without it a search would not be scoped")
        return {"query": query, "filters": state.get(FILTERS_KEY)}

    def to_dict(self) -> dict[str, Any]:
        return default_to_dict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ScopedQuery:
        return default_from_dict(cls, data)
