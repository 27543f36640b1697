"""ingest=parent_child and ingest=hierarchical end to end on the demo: small chunks indexed and retrieved, their
parent blocks kept apart and handed to the answer stage. BM25 only and the extractive answerer, so nothing is
embedded and no model loads."""

import pytest
from haystack import Document
from haystack.document_stores.in_memory import InMemoryDocumentStore

from components.context.token_budget import token_count
from experiments.runs.config import validate
from experiments.runs.indexed import load_indexed_pipeline
from pipelines.builder import build_pipeline
from pipelines.errors import ConfigError
from pipelines.index import ingest_spec
from tests.support.shipped import composed

QUESTION = "How many days of annual leave do full-time employees get?"
PROSE = "".join(f"Rule {i}: annual leave is booked early, and sick leave is separate.\n\n" for i in range(6))
TABLE = "| office | days |\n|---|---:|\n" + "".join(f"| office{i} | {10 + i} |\n" for i in range(20))


def indexed_with(tmp_path_factory, option, *overrides):
    cache = tmp_path_factory.mktemp("cache")
    cfg = composed(
        f"ingest={option}",
        "pipeline=bm25",
        "answer=extractive",
        "+pipeline.answer=${answer.stage}",
        f"paths.cache={cache}",
        *overrides,
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


def test_context_tokens_keeps_whole_parents_best_first_within_the_budget(parent_child, tmp_path_factory):
    uncapped = parent_child.query.view_documents(parent_child.query.run(question=QUESTION))["context"]
    sizes = [token_count(doc.content) for doc in uncapped]
    assert len(sizes) > 1
    capped = indexed_with(
        tmp_path_factory, "parent_child", f"ingest.context_tokens={sizes[0] + sizes[1] - 1}"
    )
    context = capped.query.view_documents(capped.query.run(question=QUESTION))["context"]
    assert [(d.id, d.content) for d in context] == [(d.id, d.content) for d in uncapped[:1]]


def test_hierarchical_indexes_the_same_way_with_a_deeper_tree(tmp_path_factory):
    hierarchical = indexed_with(tmp_path_factory, "hierarchical")
    levels = {p.meta["__level"] for p in hierarchical.parents.filter_documents()}
    assert levels == {0, 1}
    query = hierarchical.query
    outputs = query.run(question=QUESTION)
    assert "20 days of paid annual leave" in query.answer(outputs).data


@pytest.mark.parametrize("option", ["parent_child", "hierarchical"])
def test_after_the_guard_every_parent_names_the_chunks_that_are_indexed(option):
    """Blocks of 300 and chunks of 150 cut a 378-character table, which the guard makes one chunk, reaching into
    the next block: the parents must count that chunk, not the pieces it replaced."""
    settings = validate(
        composed(
            f"ingest={option}",
            "ingest.chunk_size=150",
            "ingest.parent_size=300",
            "ingest.block_sizes=[1000,300]",
        )
    )
    store, parents = InMemoryDocumentStore(), InMemoryDocumentStore()
    ingest = build_pipeline(
        ingest_spec(settings.ingest, None), {"store": store, "parents": parents}, key="ingest"
    )
    ingest.warm_up()
    text = PROSE + TABLE + "\n" + PROSE
    ingest.run(documents=[Document(id="d", content=text, meta={"doc_id": "d"})])
    chunks, blocks = store.filter_documents(), parents.filter_documents()
    assert any(chunk.content.startswith(TABLE.rstrip()) for chunk in chunks)
    nodes = {doc.id: doc for doc in [*chunks, *blocks]}
    for block in blocks:
        children = [nodes[child] for child in block.meta["__children_ids"]]
        assert len(children) > 1 and all(child.meta["__parent_id"] == block.id for child in children)
        assert block.content == "".join(text[slice(*child.meta["span"])] for child in children)
    named = [child for block in blocks for child in block.meta["__children_ids"]]
    assert sorted(named) == sorted(doc.id for doc in nodes.values() if doc.meta["__parent_id"])


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        (["ingest=parent_child", "ingest.parent_size=300"], "ingest.parent_size"),
        (["ingest=hierarchical", "ingest.block_sizes=[800,2000]"], "ingest.block_sizes"),
        (["ingest=hierarchical", "ingest.block_sizes=[]"], "ingest.block_sizes"),
        (["ingest=hierarchical", "ingest.merge_threshold=1"], "ingest.merge_threshold"),
        (["ingest=parent_child", "ingest.chain=[recursive,blocks]"], "ingest.parents"),
        (["ingest=parent_child", "ingest.max_chunk_size=299"], "ingest.max_chunk_size"),
        (["ingest=parent_child", "ingest.context_tokens=0"], "ingest.context_tokens"),
        (["ingest=recursive", "ingest.context_tokens=1000"], "ingest.context_tokens"),
    ],
)
def test_a_bad_size_is_refused_naming_its_key(overrides, key):
    with pytest.raises(ConfigError, match=f"config key '{key}'"):
        validate(composed(*overrides))
