import pytest
from haystack.components.agents.state import State

from components.agents.scoped_query import ScopedQuery

ACME = {"field": "meta.tenant", "operator": "==", "value": "acme"}


def test_the_scope_comes_from_the_agents_state():
    schema = {"filters": {"type": dict | None}}
    assert ScopedQuery().run(query="pay", state=State(schema=schema, data={"filters": ACME})) == {
        "query": "pay", "filters": ACME}
    assert ScopedQuery().run(query="pay", state=State(schema=schema))["filters"] is None


def test_without_the_filters_key_in_the_state_schema_a_search_refuses_to_run():
    with pytest.raises(ValueError, match="state_schema must declare 'filters'"):
        ScopedQuery().run(query="pay", state=State(schema={}))


def test_to_dict():
    assert ScopedQuery().to_dict() == {"type": "components.agents.scoped_query.ScopedQuery", "init_parameters": {}}
