"""Haystack filters answered as boolean masks over a retriever's documents, from an inverted index per field.

Evaluating a filter document by document costs one Python call per document, so at 100k chunks every new tenant
or user filter cost ~0.2 s on its first query. Here each `==`, `!=`, `in` and `not in` condition is answered from
the positions of each distinct value of its field, collected in one pass the first time the field is filtered on
(at warm-up for ACCESS_FIELDS), and the conditions are combined with numpy: a per-user filter costs microseconds.
Range operators (`>`, `>=`, `<`, `<=`) are evaluated per document, once per condition, and cached.

A list value (`acl: [hr, it]`) matches `==` when it contains the value and `in` when it shares one with the filter,
as Weaviate, Elasticsearch and Qdrant read array fields (Haystack's in-memory store compares the whole list, so
such a filter there matches nothing). A missing field, or None, is the value None.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from haystack import Document
from haystack.errors import FilterError
from haystack.utils.filters import document_matches_filter

# The metadata principals are scoped by (serving/principals.py): indexed when a retriever warms up.
ACCESS_FIELDS = ("meta.tenant", "meta.acl")
LOGICAL = ("AND", "OR", "NOT")
EQUALITY = ("==", "!=", "in", "not in")
RANGE = (">", ">=", "<", "<=")
MAX_CACHED_RANGES = 128
# Value indexes of fields beyond the pinned ones (ACCESS_FIELDS): each request may name new fields, so they are
# kept least recently used first and bounded.
MAX_CACHED_FIELDS = 64
DENSE_SHARE = 32  # a value on at least 1/32 of the documents is kept as a mask


def check_filters(filters: Any) -> None:
    """Raise FilterError naming what is malformed; masks and the server both call it before any document is read."""
    check_condition(filters)
    if filters["operator"] in LOGICAL:
        for condition in filters["conditions"]:
            check_filters(condition)


def check_condition(condition: Any) -> None:
    """One level of a filter: a logical operator with its list of conditions (not looked into), or a comparison."""
    if not isinstance(condition, dict):
        raise FilterError(f"a filter must be an object, got {type(condition).__name__}")
    operator = condition.get("operator")
    if operator in LOGICAL:
        conditions = condition.get("conditions")
        if set(condition) != {"operator", "conditions"} or not isinstance(conditions, list) or not conditions:
            raise FilterError(f"a logical filter ({operator}) needs exactly 'operator' and a non-empty 'conditions' list")
        return
    if operator not in EQUALITY + RANGE:
        raise FilterError(f"unknown filter operator {operator!r}; use one of {', '.join(LOGICAL + EQUALITY + RANGE)}")
    if set(condition) != {"field", "operator", "value"} or not isinstance(condition["field"], str):
        raise FilterError(f"a comparison ({operator}) needs exactly a string 'field', 'operator' and 'value'")
    if operator in ("in", "not in") and not isinstance(condition["value"], list):
        raise FilterError(f"'{operator}' needs a list value, got {type(condition['value']).__name__}")


def field_value(document: Document, field: str) -> Any:
    """`meta.a.b` walks the metadata, any other name is the document's attribute (`id`, `content`)."""
    parts = field.split(".")
    if parts[0] != "meta":
        return getattr(document, field, None)
    return _walk(document.meta, parts[1:])


def record_value(record: dict[str, Any], field: str) -> Any:
    """`field_value` of a document's `to_dict()` record, read without making the Document."""
    parts = field.split(".")
    return record.get(field) if parts[0] != "meta" else _walk(record.get("meta"), parts[1:])


def _walk(value: Any, parts: list[str]) -> Any:
    for part in parts:
        value = value.get(part) if isinstance(value, dict) else None
    return value


class FieldIndex:
    """Positions of the documents holding each distinct value of one field (each element, for a list value)."""

    def __init__(self, values: Sequence[Any]) -> None:
        """`values`: the field's value of each document, by position."""
        positions: dict[Hashable, list[int]] = {}
        unhashable: list[int] = []
        for position, value in enumerate(values):
            for element in value if isinstance(value, (list, tuple)) else [value]:
                try:
                    positions.setdefault(element, []).append(position)
                except TypeError:  # a dict or nested list: only the per-document path can compare it
                    unhashable.append(position)
        self.size = len(values)
        # A value held by many documents (`acl` missing, a big tenant) is kept as a mask: copying it is cheaper than
        # scattering its positions. At most DENSE_SHARE**-1 values per field can be that common.
        self.masks: dict[Hashable, np.ndarray] = {}
        self.positions: dict[Hashable, np.ndarray] = {}
        for value, found in positions.items():
            if len(found) * DENSE_SHARE >= self.size:
                self.masks[value] = np.zeros(self.size, dtype=bool)
                self.masks[value][found] = True
            else:
                self.positions[value] = np.asarray(found, dtype=np.int64)
        self.has_unhashable = bool(unhashable)

    def matching(self, values: Iterable[Hashable]) -> np.ndarray:
        mask = np.zeros(self.size, dtype=bool)
        for value in values:
            if value in self.masks:
                mask |= self.masks[value]
            elif value in self.positions:
                mask[self.positions[value]] = True
        return mask


class DocumentMasks:
    """Which of `documents` match a filter, as a read-only boolean array."""

    def __init__(
        self,
        documents: Sequence[Document],
        indexed_fields: Iterable[str] = (),
        values: Mapping[str, Sequence[Any]] | None = None,
    ) -> None:
        """`indexed_fields` are indexed now and kept; `values` may hold their values by position where the caller
        read them already (a snapshot's records), so the documents are not read again for them."""
        self._documents = documents
        given = values or {}
        self._pinned = {
            field: FieldIndex(given[field] if field in given else [field_value(d, field) for d in documents])
            for field in indexed_fields
        }
        self._fields: OrderedDict[str, FieldIndex] = OrderedDict()
        self._ranges: dict[str, np.ndarray] = {}
        self._lock = threading.Lock()

    def mask(self, filters: dict[str, Any]) -> np.ndarray:
        """Return which documents match `filters` (Haystack filter syntax)."""
        check_filters(filters)
        mask = self._evaluate(filters)
        mask.flags.writeable = False
        return mask

    def _evaluate(self, condition: dict[str, Any]) -> np.ndarray:
        operator = condition["operator"]
        if operator in LOGICAL:
            masks = [self._evaluate(c) for c in condition["conditions"]]
            if operator == "OR":
                return np.logical_or.reduce(masks)
            both = np.logical_and.reduce(masks)
            return ~both if operator == "NOT" else both
        index = self._index(condition["field"])
        values = condition["value"] if operator in ("in", "not in") else [condition["value"]]
        if operator in RANGE or index.has_unhashable or not all(isinstance(v, Hashable) for v in values):
            return self._per_document(condition)
        mask = index.matching(values)
        return ~mask if operator in ("!=", "not in") else mask

    def _index(self, field: str) -> FieldIndex:
        if field in self._pinned:
            return self._pinned[field]
        with self._lock:
            if field in self._fields:
                self._fields.move_to_end(field)
            else:
                self._fields[field] = FieldIndex([field_value(d, field) for d in self._documents])
                if len(self._fields) > MAX_CACHED_FIELDS:
                    self._fields.popitem(last=False)
            return self._fields[field]

    def _per_document(self, condition: dict[str, Any]) -> np.ndarray:
        key = json.dumps(condition, sort_keys=True, default=repr)
        with self._lock:
            cached = self._ranges.get(key)
        if cached is not None:
            return cached
        mask = np.fromiter((_matches(condition, doc) for doc in self._documents), dtype=bool, count=len(self._documents))
        with self._lock:
            if len(self._ranges) >= MAX_CACHED_RANGES:
                self._ranges.pop(next(iter(self._ranges)))
            self._ranges[key] = mask
        return mask


def _matches(condition: dict[str, Any], document: Document) -> bool:
    """A document whose value the comparison cannot take (a list against a number, text against a date) does not
    match, rather than failing the whole filter: whether a filter fails must not depend on documents the caller
    may not see, and this mask is computed over all of them before the caller's scope is applied."""
    try:
        return document_matches_filter(condition, document)
    except (FilterError, TypeError, ValueError):
        return False
