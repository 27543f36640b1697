import random

import numpy as np
import pytest
from haystack import Document
from haystack.errors import FilterError
from haystack.utils.filters import document_matches_filter

from components.retrievers import document_masks
from components.retrievers.document_masks import DocumentMasks, check_filters

FIELDS = {"meta.tenant": ["a", "b", "c", None], "meta.year": [2020, 2021, 2022, None], "id": ["d0", "d1", "d2"]}


def random_documents(rng: random.Random, count: int) -> list[Document]:
    documents = []
    for i in range(count):
        meta = {key: value for key in ("tenant", "year") if (value := rng.choice(FIELDS[f"meta.{key}"])) is not None}
        documents.append(Document(id=f"d{i}", content=str(i), meta=meta))
    return documents


def random_filter(rng: random.Random, depth: int = 0) -> dict:
    if depth < 2 and rng.random() < 0.5:
        conditions = [random_filter(rng, depth + 1) for _ in range(rng.randint(1, 3))]
        return {"operator": rng.choice(["AND", "OR", "NOT"]), "conditions": conditions}
    field = rng.choice(list(FIELDS))
    operator = rng.choice(["==", "!=", "in", "not in"] + ([">", "<="] if field == "meta.year" else []))
    values = [v for v in FIELDS[field] if v is not None or operator in ("==", "!=", "in", "not in")]
    value = rng.sample(values, 2) if operator in ("in", "not in") else rng.choice(values)
    return {"field": field, "operator": operator, "value": value}


def test_masks_agree_with_haystack_on_scalar_fields():
    rng = random.Random(7)
    documents = random_documents(rng, 60)
    masks = DocumentMasks(documents, ("meta.tenant",))
    for _ in range(300):
        filters = random_filter(rng)
        expected = [document_matches_filter(filters, doc) for doc in documents]
        assert masks.mask(filters).tolist() == expected, filters


def test_a_list_value_matches_when_it_holds_the_value_or_shares_one():
    documents = [Document(content="x", meta=m) for m in ({"acl": ["hr", "it"]}, {"acl": ["it"]}, {}, {"acl": []})]
    masks = DocumentMasks(documents)
    assert masks.mask({"field": "meta.acl", "operator": "==", "value": "hr"}).tolist() == [True, False, False, False]
    assert masks.mask({"field": "meta.acl", "operator": "in", "value": ["hr", "ops"]}).tolist() == [
        True, False, False, False]
    assert masks.mask({"field": "meta.acl", "operator": "!=", "value": "hr"}).tolist() == [False, True, True, True]
    # Missing is None; an empty list holds no value, not None.
    assert masks.mask({"field": "meta.acl", "operator": "==", "value": None}).tolist() == [False, False, True, False]


def test_equality_never_reads_documents_after_the_index_and_ranges_are_cached(monkeypatch):
    documents = random_documents(random.Random(1), 50)
    masks = DocumentMasks(documents, ("meta.tenant", "meta.year"))
    year = {"field": "meta.year", "operator": ">", "value": 2020}
    first = masks.mask(year)
    calls = []
    monkeypatch.setattr(document_masks, "document_matches_filter", lambda *a: calls.append(a) or True)
    monkeypatch.setattr(document_masks, "field_value", lambda *a: calls.append(a))
    tenant = {"operator": "OR", "conditions": [
        {"field": "meta.tenant", "operator": "==", "value": "a"}, {"field": "meta.tenant", "operator": "==", "value": None}]}
    assert masks.mask(tenant).sum() == sum(doc.meta.get("tenant") in ("a", None) for doc in documents)
    assert np.array_equal(masks.mask(year), first)
    assert calls == []


def test_unhashable_values_fall_back_to_haystack():
    documents = [Document(content="x", meta={"tags": {"k": 1}}), Document(content="y", meta={"tags": "k"})]
    masks = DocumentMasks(documents)
    assert masks.mask({"field": "meta.tags", "operator": "==", "value": {"k": 1}}).tolist() == [True, False]
    assert masks.mask({"field": "meta.tags", "operator": "==", "value": "k"}).tolist() == [False, True]


def test_masks_are_read_only():
    mask = DocumentMasks(random_documents(random.Random(2), 5)).mask({"field": "id", "operator": "==", "value": "d1"})
    with pytest.raises(ValueError):
        mask[0] = True


@pytest.mark.parametrize(("filters", "message"), [
    ("meta.tenant == a", "must be an object"),
    ({"field": "meta.tenant", "value": "a"}, "unknown filter operator None"),
    ({"field": "meta.tenant", "operator": "=", "value": "a"}, "unknown filter operator '='"),
    ({"field": "meta.tenant", "operator": "==", "value": "a", "or": 1}, "exactly a string 'field'"),
    ({"operator": "OR", "conditions": []}, "non-empty 'conditions'"),
    ({"operator": "AND", "conditions": [{"operator": "OR"}]}, "non-empty 'conditions'"),
    ({"field": "meta.tenant", "operator": "in", "value": "a"}, "'in' needs a list"),
])
def test_malformed_filters_are_named(filters, message):
    with pytest.raises(FilterError, match=message):
        check_filters(filters)


def test_common_and_rare_values_combine():
    """A value on many documents is kept as a mask, a rare one as positions: `in` mixes both."""
    documents = [Document(content="x", meta={"tenant": "big"}) for _ in range(60)]
    documents += [Document(content="x", meta={"tenant": f"t{i}"}) for i in range(10)]
    masks = DocumentMasks(documents, ("meta.tenant",))
    expected = [d.meta["tenant"] in ("big", "t3") for d in documents]
    assert masks.mask({"field": "meta.tenant", "operator": "in", "value": ["big", "t3", "absent"]}).tolist() == expected
    assert masks.mask({"field": "meta.tenant", "operator": "not in", "value": ["big", "t3"]}).sum() == 9
    big = masks.mask({"field": "meta.tenant", "operator": "==", "value": "big"})
    assert big.sum() == 60 and masks.mask({"field": "meta.tenant", "operator": "==", "value": "big"}).sum() == 60


@pytest.mark.parametrize("condition", [
    {"field": "meta.acl", "operator": ">", "value": 1},  # a list on some documents: not comparable with 1
    {"field": "meta.page", "operator": ">=", "value": "2024-01-01"},  # a number where a date goes
    {"field": "meta.acl", "operator": "<", "value": "b"},
])
def test_a_comparison_a_documents_value_cannot_take_is_no_match_not_an_error(condition):
    """Whether a filter fails must not depend on documents the caller may not see: the mask covers all of them."""
    documents = [Document(content="x", meta=m) for m in ({"acl": ["hr"], "page": 3}, {"page": "v"}, {})]
    assert DocumentMasks(documents).mask(condition).tolist() == [False, False, False]


def test_list_valued_equality_is_answered_per_document_not_an_unhashable_error():
    documents = [Document(content="x", meta={"acl": ["hr"]}), Document(content="y", meta={})]
    assert DocumentMasks(documents).mask({"field": "meta.acl", "operator": "==", "value": ["hr"]}).tolist() == [True, False]


def test_value_indexes_of_request_fields_are_bounded_and_the_access_fields_stay():
    from components.retrievers.document_masks import MAX_CACHED_FIELDS

    masks = DocumentMasks([Document(content="x", meta={"tenant": "a", "f0": 1})], ("meta.tenant",))
    for i in range(MAX_CACHED_FIELDS * 3):
        masks.mask({"field": f"meta.f{i}", "operator": "==", "value": 1})
    assert len(masks._fields) == MAX_CACHED_FIELDS and "meta.f0" not in masks._fields
    assert list(masks._pinned) == ["meta.tenant"]
    assert masks.mask({"field": "meta.f0", "operator": "==", "value": 1}).tolist() == [True]  # rebuilt on demand
