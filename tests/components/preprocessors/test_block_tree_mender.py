import pytest
from haystack import Document
from haystack.components.retrievers import AutoMergingRetriever
from haystack.document_stores.in_memory import InMemoryDocumentStore

from components.preprocessors.block_hierarchy_splitter import (
    BLOCK_SIZE,
    CHILDREN_IDS,
    LEVEL,
    PARENT_ID,
    BlockHierarchySplitter,
)
from components.preprocessors.block_tree_mender import BlockTreeMender
from components.preprocessors.chunk_guard import ChunkGuard, find_blocks
from components.preprocessors.chunk_span_locator import ChunkSpanLocator

SEPARATORS = ["\n\n", "\n", ". ", " "]
PROSE = "".join(f"Rule {i}: annual leave is booked early, and sick leave is separate.\n\n" for i in range(6))
TABLE = "| office | days |\n|---|---:|\n" + "".join(f"| office{i} | {10 + i} |\n" for i in range(20))
TEXT = PROSE + TABLE + "\n" + PROSE
SOURCE = Document(id="d", content=TEXT, meta={"doc_id": "d", "acl": ["hr"]})


def tree(source=SOURCE, sizes=(1000, 300), chunk_size=150):
    """The splitter's leaves through the span locator and the guard, and its parents: what the mender gets."""
    cut = BlockHierarchySplitter(parent_sizes=list(sizes), chunk_size=chunk_size, separators=SEPARATORS)
    cut.warm_up()
    split = cut.run(documents=[source])
    located = ChunkSpanLocator().run(chunks=split["documents"], sources=[source])["documents"]
    guarded = ChunkGuard(chunk_size=chunk_size).run(documents=located, sources=[source])["documents"]
    return split["documents"], guarded, split["parents"]


def mended(guarded, parents, source=SOURCE):
    return BlockTreeMender().run(documents=guarded, parents=parents, sources=[source])


def assert_whole(leaves, parents, text=TEXT):
    """Every parent is exactly its children's text and names them; every child names its parent back."""
    nodes = {doc.id: doc for doc in [*leaves, *parents]}
    assert len(nodes) == len(leaves) + len(parents)
    for parent in parents:
        children = [nodes[child] for child in parent.meta[CHILDREN_IDS]]
        start, end = parent.meta["span"]
        assert len(children) > 1 and parent.content == text[start:end] == "".join(
            text[slice(*child.meta["span"])] for child in children
        )
        for child in children:
            assert child.meta[PARENT_ID] == parent.id and child.meta[LEVEL] == parent.meta[LEVEL] + 1
    named = [child for parent in parents for child in parent.meta[CHILDREN_IDS]]
    assert sorted(named) == sorted(doc.id for doc in nodes.values() if doc.meta[PARENT_ID] is not None)


def holds(doc, start, end):
    return doc.meta["span"][0] <= start and end <= doc.meta["span"][1]


def merged_around(leaves, parents, start, end):
    """What AutoMergingRetriever hands over for the chunk holding [start, end) and the chunks beside it under its
    parent (half of that parent's children, or more)."""
    store = InMemoryDocumentStore()
    store.write_documents(parents)
    hit = next(leaf for leaf in leaves if holds(leaf, start, end))
    family = [leaf for leaf in leaves if leaf.meta[PARENT_ID] == hit.meta[PARENT_ID]]
    return AutoMergingRetriever(store, threshold=0.45).run(documents=family)["documents"]


def test_after_the_guard_merges_leaves_each_parent_counts_the_chunks_that_are_indexed():
    """The table (378 characters) is cut by blocks of 300 and by the chunks: the guard makes it one chunk that
    reaches into the next block."""
    leaves, guarded, parents = tree()
    (table,) = find_blocks(TEXT)
    assert len(guarded) < len(leaves)
    merged = merged_around(guarded, parents, table.start, table.end)
    assert not all(holds(doc, table.start, table.end) for doc in merged)  # a stale parent cuts the table
    out = mended(guarded, parents)
    assert [leaf.content for leaf in out["documents"]] == [leaf.content for leaf in guarded]
    assert_whole(out["documents"], out["parents"])
    merged = merged_around(out["documents"], out["parents"], table.start, table.end)
    holder = next(p for p in out["parents"] if holds(p, table.start, table.end))  # the first: the root
    assert [doc.id for doc in merged] == [holder.id]
    assert all(doc.meta["acl"] == ["hr"] for doc in [*out["documents"], *out["parents"]])


def test_a_tree_the_guard_left_alone_comes_back_block_for_block():
    source = Document(id="p", content=PROSE * 2, meta={"doc_id": "p"})
    leaves, guarded, parents = tree(source)
    out = mended(guarded, parents, source)
    assert all(a is b for a, b in zip(out["documents"], guarded, strict=True))
    assert all(a is b for a, b in zip(out["parents"], parents, strict=True))


def block(doc_id, start, end, parent, level, size, children=()):
    meta = {
        "doc_id": doc_id,
        "span": [start, end],
        "tenant": "t1",
        PARENT_ID: parent,
        CHILDREN_IDS: list(children),
        LEVEL: level,
        BLOCK_SIZE: size,
    }
    return Document(id=f"{doc_id}#{start}-{end}", content=TEXT[start:end], meta=meta)


def test_a_leaf_reaching_into_the_next_block_grows_its_own_and_shrinks_that_one():
    root, first, second = family()
    reaching = block("d", 75, 225, first.id, 2, 75)  # the guard merged first's second leaf and second's first
    leaves = [block("d", 0, 75, first.id, 2, 75), reaching, block("d", 225, 300, second.id, 2, 75)]
    out = mended(leaves, [root, first, second])
    assert [p.id for p in out["parents"]] == [root.id, "d#0-225"]  # second kept one child: it is that child
    assert out["parents"][1].meta[CHILDREN_IDS] == ["d#0-75", reaching.id]
    assert out["parents"][0].meta[CHILDREN_IDS] == ["d#0-225", "d#225-300"]
    assert_whole(out["documents"], out["parents"])


def family():
    root = block("d", 0, 300, None, 0, 300, ["d#0-150", "d#150-300"])
    first = block("d", 0, 150, root.id, 1, 150, ["d#0-75", "d#75-150"])
    second = block("d", 150, 300, root.id, 1, 150, ["d#150-225", "d#225-300"])
    return root, first, second


def test_a_parent_left_with_one_child_gives_it_its_place_and_one_left_with_none_is_dropped():
    root, first, second = family()
    merged = block("d", 0, 150, first.id, 2, 75)  # the guard merged first's two leaves
    rest = [block("d", 150, 225, second.id, 2, 75), block("d", 225, 300, second.id, 2, 75)]
    out = mended([merged, *rest], [root, first, second])
    assert [p.id for p in out["parents"]] == [root.id, second.id]
    leaf = out["documents"][0]
    assert (leaf.id, leaf.meta[PARENT_ID], leaf.meta[LEVEL], leaf.meta[BLOCK_SIZE]) == (
        "d#0-150",
        root.id,
        1,
        150,
    )
    assert out["parents"][0].meta[CHILDREN_IDS] == ["d#0-150", second.id] and out["documents"][1:] == rest
    swallowed = block("d", 0, 300, first.id, 2, 75)  # one leaf over both blocks: second has no child left
    out = mended([swallowed], [root, first, second])
    assert out["parents"] == [] and out["documents"][0].meta[PARENT_ID] is None
    assert out["documents"][0].meta[LEVEL] == 0 and out["documents"][0].meta[BLOCK_SIZE] == 300


def test_a_leaf_naming_no_known_parent_is_refused():
    with pytest.raises(ValueError, match="d#0-75"):
        mended([block("d", 0, 75, "d#0-150", 2, 75)], [])


def test_to_dict_and_from_dict():
    data = BlockTreeMender().to_dict()
    assert data == {
        "type": "components.preprocessors.block_tree_mender.BlockTreeMender",
        "init_parameters": {},
    }
    assert BlockTreeMender.from_dict(data).to_dict() == data
