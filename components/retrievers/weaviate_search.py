"""Filters as every Weaviate retriever sends them (`scoped_search(..., rewrite=weaviate_filters)`): rewritten so
that weaviate-haystack's translation means on the server what the in-memory masks (`document_masks.py`) mean here.

weaviate-haystack's translation differs from them in four ways, each fixed before it sees a filter:

- `==` and `!=` parse a string value as a date when it can ("2024", "2024-05-01"), so a filter on tenant `2024`
  compared the tenant with a timestamp. On the exact-value fields of our schema they become `in`/`not in`, which
  compare the string as it is (with `field` tokenisation, containing one value is equality);
- `not in` skipped documents without the field, which `!=` and the in-memory masks keep;
- `in []` and `not in []` reach the server as an empty ContainsAny or AND, which it refuses; they match nothing and
  everything;
- `id` is stored as `_original_id` (Weaviate reserves `id` for its UUIDs).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from haystack.errors import FilterError

# Filtered on by exact value, so declared with `field` tokenisation (pipelines/index/weaviate.py): with Weaviate's
# default `word`, a filter on tenant `acme` would also match a tenant `acme-labs`.
EXACT_TEXT = ("_original_id", "doc_id", "tenant", "file_path", "lang")
EXACT_TEXT_ARRAYS = ("acl",)
EXACT_FIELDS = frozenset(EXACT_TEXT + EXACT_TEXT_ARRAYS)


def weaviate_filters(filters: dict[str, Any]) -> dict[str, Any]:
    if "field" not in filters:
        return {"operator": filters["operator"], "conditions": [weaviate_filters(c) for c in filters["conditions"]]}
    field = "_original_id" if filters["field"] == "id" else filters["field"]
    operator, value = filters["operator"], filters["value"]
    if operator in ("==", "!=") and isinstance(value, str) and field.removeprefix("meta.") in EXACT_FIELDS:
        operator, value = ("in" if operator == "==" else "not in"), [value]
    if operator == "in" and value == []:
        return _matching(field, everything=False)
    if operator == "not in":
        if value == []:
            return _matching(field, everything=True)
        return {"operator": "OR", "conditions": [
            {"field": field, "operator": "not in", "value": value},
            {"field": field, "operator": "==", "value": None},
        ]}
    return {"field": field, "operator": operator, "value": value}


def _matching(field: str, everything: bool) -> dict[str, Any]:
    """Every document (the field set or not) or none (set and not set at once), as filters Weaviate accepts."""
    unset, is_set = ({"field": field, "operator": op, "value": None} for op in ("==", "!="))
    return {"operator": "OR" if everything else "AND", "conditions": [unset, is_set]}


@contextmanager
def refused_filters(filters: dict[str, Any] | None) -> Iterator[None]:
    """A query the server refuses for its filters (a field the collection does not have, a value of the wrong
    type) is the request's fault: a FilterError that says what Weaviate said, not the client's traceback.

    weaviate-client is imported here, not with this module: its package init turns every Python warning back on
    (`simplefilter("default")`), which an in-memory run, importing this module for its constants, must not do."""
    from weaviate.exceptions import WeaviateQueryError

    try:
        yield
    except WeaviateQueryError as e:
        if filters is None:
            raise
        message = getattr(e, "message", None) or str(e)
        raise FilterError(
            f"Weaviate refused the query's filters {json.dumps(filters, ensure_ascii=False)}: {message}"
        ) from None
