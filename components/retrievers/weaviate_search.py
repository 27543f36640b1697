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

`ScopedWeaviateSearch` runs each query of the retrievers built on Haystack's Weaviate ones (BM25, embedding) that way.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from haystack import Document
from haystack.document_stores.types import FilterPolicy
from haystack.errors import FilterError

from components.retrievers.retrieval import scoped_search

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


Filters = dict[str, Any] | None
Found = dict[str, list[Document]]
StoreSearch = Callable[..., list[Document]]
AsyncStoreSearch = Callable[..., Awaitable[list[Document]]]


class ScopedWeaviateSearch:
    """What our retrievers built on Haystack's Weaviate ones (BM25, embedding) do with each query: its filters and
    top_k under our contract (`scoped_search`), refused filters named, and each document found made `_returned`
    (by default: without its vector, which only the server needs). `run` and `run_async` hand the store's
    retrieval method and the query's own arguments to `_documents` and `_documents_async`."""

    _filter_policy: FilterPolicy
    _filters: dict[str, Any]
    _top_k: int

    @staticmethod
    def _returned(document: Document) -> Document:
        return replace(document, embedding=None)

    def _documents(self, retrieve: StoreSearch, filters: Filters, top_k: int | None, **query: Any) -> Found:
        search = self._search(filters, top_k)
        if search is None:
            return {"documents": []}
        with refused_filters(search["filters"]):
            found = retrieve(**query, **search)
        return {"documents": [self._returned(doc) for doc in found]}

    async def _documents_async(
        self, retrieve: AsyncStoreSearch, filters: Filters, top_k: int | None, **query: Any
    ) -> Found:
        search = self._search(filters, top_k)
        if search is None:
            return {"documents": []}
        with refused_filters(search["filters"]):
            found = await retrieve(**query, **search)
        return {"documents": [self._returned(doc) for doc in found]}

    def _search(self, filters: Filters, top_k: int | None) -> dict[str, Any] | None:
        policy, init_filters, default_top_k = self._filter_policy, self._filters, self._top_k
        return scoped_search(policy, init_filters, default_top_k, filters, top_k, rewrite=weaviate_filters)
