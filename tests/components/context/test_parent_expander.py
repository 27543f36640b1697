import pytest
from haystack import Document
from haystack.document_stores.in_memory import InMemoryDocumentStore

from components.context.parent_expander import ParentExpander
from components.preprocessors.block_hierarchy_splitter import BlockHierarchySplitter
from components.preprocessors.chunk_span_locator import ChunkSpanLocator

# Twelve ten-character words: with blocks of 60 and 30 over chunks of 10, each block of 60 holds two of 30, each of
# those three chunks.
TEXT = "".join(f"word{i:02d}abc " for i in range(12))
SHORT = "Short."


def indexed(parent_sizes):
    """The leaves as the index holds them (past the span locator), and a store of the parent blocks."""
    sources = [
        Document(id="d", content=TEXT, meta={"doc_id": "d", "tenant": "t1"}),
        Document(id="s", content=SHORT, meta={"doc_id": "s"}),
    ]
    result = BlockHierarchySplitter(parent_sizes=parent_sizes, chunk_size=10, separators=[" "]).run(
        documents=sources
    )
    leaves = ChunkSpanLocator().run(chunks=result["documents"], sources=sources)["documents"]
    parents = InMemoryDocumentStore()
    parents.write_documents(result["parents"])
    return {leaf.id: leaf for leaf in leaves}, parents


def hits(leaves, *spans):
    """Retrieved leaves, best first, with falling scores and a meta key a retrieval stage added."""
    return [
        Document(
            id=f"d#{start}-{start + 10}",
            content=leaves[f"d#{start}-{start + 10}"].content,
            meta={**leaves[f"d#{start}-{start + 10}"].meta, "fusion_ranks": {"bm25": rank}},
            score=1.0 - rank / 10,
        )
        for rank, start in enumerate(spans)
    ]


def expanded(parent_sizes, threshold, *spans):
    leaves, parents = indexed(parent_sizes)
    return ParentExpander(parents, threshold).run(documents=hits(leaves, *spans))["documents"]


def test_any_hit_brings_its_parent_once_at_its_best_childs_place_with_its_score():
    documents = expanded([30], 0.0, 40, 0, 50)
    assert [(d.id, d.score) for d in documents] == [("d#30-60", 1.0), ("d#0-30", 0.9)]
    for doc in documents:
        start, end = doc.meta["span"]
        assert doc.content == TEXT[start:end] and doc.id == f"d#{start}-{end}"
        assert doc.meta["tenant"] == "t1" and "fusion_ranks" in doc.meta and doc.embedding is None
    assert documents[0].meta["fusion_ranks"] == {"bm25": 0}  # the best child's


def test_a_parent_replaces_its_children_only_past_the_threshold():
    assert [d.id for d in expanded([60, 30], 0.5, 0, 70)] == ["d#0-10", "d#70-80"]  # 1 of 3 each: kept
    assert [d.id for d in expanded([60, 30], 0.5, 0, 70, 10)] == ["d#0-30", "d#70-80"]  # 2 of 3: merged


def test_merging_goes_on_up_the_tree():
    documents = expanded([60, 30], 0.5, 30, 0, 40, 10)
    assert [(d.id, d.score, d.meta["span"]) for d in documents] == [("d#0-60", 1.0, [0, 60])]
    assert documents[0].content == TEXT[:60]


def test_the_order_is_the_best_childs_rank_whatever_merged():
    documents = expanded([60, 30], 0.5, 70, 0, 10)
    assert [(d.id, d.score) for d in documents] == [("d#70-80", 1.0), ("d#0-30", 0.9)]


def test_a_hit_without_a_parent_stays_as_it_is():
    leaves, parents = indexed([30])
    short = Document(id="s#0-6", content=SHORT, meta=leaves["s#0-6"].meta, score=2.0)
    documents = ParentExpander(parents, 0.0).run(documents=[short, *hits(leaves, 0)])["documents"]
    assert [(d.id, d.content, d.score) for d in documents] == [
        ("s#0-6", SHORT, 2.0),
        ("d#0-30", TEXT[:30], 1.0),
    ]


def test_no_text_is_handed_over_twice():
    documents = expanded([60, 30], 0.0, 0, 10, 20, 30, 70)
    spans = sorted(d.meta["span"] for d in documents)
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:], strict=False))
    assert len({d.id for d in documents}) == len(documents)


def test_nothing_in_nothing_out_and_a_hit_from_another_index_is_refused():
    _, parents = indexed([30])
    assert ParentExpander(parents).run(documents=[])["documents"] == []
    with pytest.raises(ValueError, match="not indexed by BlockHierarchySplitter"):
        ParentExpander(parents).run(
            documents=[Document(id="x", content="x", meta={"doc_id": "x", "span": [0, 1]})]
        )


def test_max_tokens_keeps_whole_blocks_best_first_while_they_fit():
    leaves, parents = indexed([30])

    def ids(max_tokens):
        expander = ParentExpander(parents, 0.0, max_tokens=max_tokens)
        return [d.id for d in expander.run(documents=hits(leaves, 40, 0, 50))["documents"]]

    assert ids(None) == ids(6) == ["d#30-60", "d#0-30"]  # three words each
    assert ids(5) == ids(1) == ["d#30-60"]  # the best is kept whatever its size, never cut


@pytest.mark.parametrize(
    ("params", "name"),
    [
        ({"threshold": -0.1}, "threshold"),
        ({"threshold": 1.0}, "threshold"),
        ({"max_tokens": 0}, "max_tokens"),
    ],
)
def test_a_threshold_outside_0_to_1_or_a_budget_under_1_is_refused(params, name):
    with pytest.raises(ValueError, match=name):
        ParentExpander(InMemoryDocumentStore(), **params)


def test_to_dict_holds_every_init_parameter_and_from_dict_restores_them():
    store = InMemoryDocumentStore()
    data = ParentExpander(store, threshold=0.25, max_tokens=800).to_dict()
    assert data == {
        "type": "components.context.parent_expander.ParentExpander",
        "init_parameters": {"document_store": store.to_dict(), "threshold": 0.25, "max_tokens": 800},
    }
    clone = ParentExpander.from_dict(data)
    assert isinstance(clone.retriever.document_store, InMemoryDocumentStore) and clone.to_dict() == data
