"""ingest=parent_child and ingest=hierarchical end to end on the demo: small chunks indexed and retrieved, their
parent blocks kept apart and handed to the answer stage. BM25 only and the extractive answerer, so nothing is
embedded and no model loads."""

import pytest

from experiments.runs.config import validate
from experiments.runs.indexed import load_indexed_pipeline
from pipelines.errors import ConfigError
from tests.support.shipped import composed

QUESTION = "How many days of annual leave do full-time employees get?"


def indexed_with(tmp_path_factory, option):
    cache = tmp_path_factory.mktemp("cache")
    cfg = composed(
        f"ingest={option}",
        "pipeline=bm25",
        "answer=extractive",
        "+pipeline.answer=${answer.stage}",
        f"paths.cache={cache}",
    )
    return load_indexed_pipeline(validate(cfg))


@pytest.fixture(scope="module")
def parent_child(tmp_path_factory):
    return indexed_with(tmp_path_factory, "parent_child")


def test_the_chunks_are_indexed_and_their_parents_kept_apart(parent_child):
    texts = {doc.id: doc.content for doc in parent_child.dataset.documents}
    chunks, parents = parent_child.store.filter_documents(), parent_child.parents.filter_documents()
    assert parents and not {p.id for p in parents} & {c.id for c in chunks}
    assert max(len(c.content) for c in chunks) <= 300 < max(len(p.content) for p in parents) <= 1500
    for block in [*chunks, *parents]:
        start, end = block.meta["span"]
        assert texts[block.meta["doc_id"]][start:end] == block.content
    assert {c.meta["__parent_id"] for c in chunks} - {None} == {p.id for p in parents}


def test_the_answer_stage_gets_each_hits_parent_once_at_its_best_hits_place(parent_child):
    query = parent_child.query
    outputs = query.run(question=QUESTION)
    hits = query.documents_at(outputs, query.views["stage/context_window"])
    context = query.view_documents(outputs)["context"]
    parents = {p.id: p for p in parent_child.parents.filter_documents()}
    assert context and all(doc.id in parents for doc in context)
    assert [doc.id for doc in context] == list(dict.fromkeys(hit.meta["__parent_id"] for hit in hits))
    assert [doc.score for doc in context] == [
        max(h.score for h in hits if h.meta["__parent_id"] == d.id) for d in context
    ]
    assert sum(len(d.content) for d in context) > sum(len(h.content) for h in hits)
    assert all(d.meta["span"][1] - d.meta["span"][0] == len(d.content) for d in context)
    assert "20 days of paid annual leave" in query.answer(outputs).data


def test_hierarchical_indexes_the_same_way_with_a_deeper_tree(tmp_path_factory):
    hierarchical = indexed_with(tmp_path_factory, "hierarchical")
    levels = {p.meta["__level"] for p in hierarchical.parents.filter_documents()}
    assert levels == {0, 1}
    query = hierarchical.query
    outputs = query.run(question=QUESTION)
    assert "20 days of paid annual leave" in query.answer(outputs).data


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        (["ingest=parent_child", "ingest.parent_size=300"], "ingest.parent_size"),
        (["ingest=hierarchical", "ingest.block_sizes=[800,2000]"], "ingest.block_sizes"),
        (["ingest=hierarchical", "ingest.block_sizes=[]"], "ingest.block_sizes"),
        (["ingest=hierarchical", "ingest.merge_threshold=1"], "ingest.merge_threshold"),
        (["ingest=parent_child", "ingest.chain=[recursive,blocks]"], "ingest.parents"),
    ],
)
def test_a_bad_size_is_refused_naming_its_key(overrides, key):
    with pytest.raises(ConfigError, match=f"config key '{key}'"):
        validate(composed(*overrides))
