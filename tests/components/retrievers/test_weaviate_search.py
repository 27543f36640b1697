"""The filter rewrite keeps the in-memory meaning and gives weaviate-haystack's translation nothing it mistranslates.
Backed by tests/pipelines/index/test_weaviate.py against a server when WEAVIATE_URL is set."""

import itertools

import numpy as np
import pytest
from haystack import Document
from haystack_integrations.document_stores.weaviate._filters import convert_filters

from components.retrievers.document_masks import DocumentMasks
from components.retrievers.weaviate_search import weaviate_filters

DOCUMENTS = [
    Document(id="a", content="x", meta={"tenant": "2024", "acl": ["hr"], "doc_id": "2024-05-01.md", "year": 2024}),
    Document(id="b", content="x", meta={"tenant": "acme", "acl": ["hr", "it"], "doc_id": "b.md", "year": 2023}),
    Document(id="c", content="x", meta={"tenant": "acme", "doc_id": "c.md"}),
    Document(id="d", content="x", meta={"doc_id": "d.md"}),
]
VALUES = {"meta.tenant": ["2024", "acme", "nobody"], "meta.acl": ["hr", "it"], "meta.doc_id": ["2024-05-01.md"],
          "meta.year": [2024]}


def comparisons():
    for field, values in VALUES.items():
        for value in values:
            yield {"field": field, "operator": "==", "value": value}
            yield {"field": field, "operator": "!=", "value": value}
        for size in (0, 1, 2):
            for chosen in itertools.combinations(values, min(size, len(values))):
                yield {"field": field, "operator": "in", "value": list(chosen)}
                yield {"field": field, "operator": "not in", "value": list(chosen)}


CASES = [*comparisons()]
CASES += [{"operator": "NOT", "conditions": [case]} for case in CASES]


@pytest.mark.parametrize("condition", CASES, ids=str)
def test_the_rewrite_matches_the_same_documents_as_the_original(condition):
    masks = DocumentMasks(DOCUMENTS)
    assert np.array_equal(masks.mask(weaviate_filters(condition)), masks.mask(condition))
    convert_filters(weaviate_filters(condition))  # and weaviate-haystack translates it


def leaves(weaviate_filter):
    if hasattr(weaviate_filter, "filters"):
        return [leaf for child in weaviate_filter.filters for leaf in leaves(child)]
    return [weaviate_filter]


def test_exact_fields_compare_strings_as_strings_not_dates():
    """weaviate-haystack turns `tenant == "2024"` into a timestamp; rewritten, the server compares "2024"."""
    for operator in ("==", "!="):
        condition = {"field": "meta.tenant", "operator": operator, "value": "2024"}
        values = [leaf.value for leaf in leaves(convert_filters(weaviate_filters(condition)))]
        assert ["2024"] in values or "2024" in values, values
        assert not any("T00:00:00" in str(value) for value in values)


def test_other_fields_keep_weaviate_haystacks_date_reading():
    condition = {"field": "meta.published", "operator": "==", "value": "2024-05-01"}
    assert weaviate_filters(condition) == condition


def test_empty_lists_never_reach_the_server_as_an_empty_contains_any():
    for operator in ("in", "not in"):
        condition = {"field": "meta.acl", "operator": operator, "value": []}
        assert all(leaf.value != [] for leaf in leaves(convert_filters(weaviate_filters(condition))))


def test_the_haystack_id_is_weaviates_original_id():
    condition = {"field": "id", "operator": "in", "value": ["a"]}
    assert {leaf.target for leaf in leaves(convert_filters(weaviate_filters(condition)))} == {"_original_id"}
