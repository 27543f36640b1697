import pytest
from haystack import Document

from components.preprocessors.block_hierarchy_splitter import BlockHierarchySplitter
from components.preprocessors.chunk_span_locator import ChunkSpanLocator

SEPARATORS = ["\n\n", "\n", "。", "，", ". ", ", ", " "]
EN = "# Leave\n\n" + "".join(
    f"Rule {i}: annual leave is fifteen days a year, and it must be booked early. Sick leave is separate.\n\n"
    for i in range(12)
)
ZH = "# 假期\n\n" + "".join(
    f"第{i}条：员工每年有十五天带薪年假，入职满一年后开始计算。病假需要提供医院证明。\n\n" for i in range(20)
)
SOURCES = [
    Document(id="en", content=EN, meta={"doc_id": "en", "tenant": "t1"}),
    Document(id="zh", content=ZH, meta={"doc_id": "zh", "acl": ["hr"]}),
]
TEXTS = {"en": EN, "zh": ZH}


def split(parent_sizes=(600, 250), chunk_size=100, sources=SOURCES):
    splitter = BlockHierarchySplitter(
        parent_sizes=list(parent_sizes), chunk_size=chunk_size, separators=SEPARATORS
    )
    return splitter.run(documents=sources)


def span_of(block):
    """The span a block's id names (`doc#start-end`)."""
    return [int(n) for n in block.id.rpartition("#")[2].split("-")]


def text_of(block):
    start, end = span_of(block)
    return TEXTS[block.meta["doc_id"]][start:end]


@pytest.mark.parametrize("doc", ["en", "zh"])
def test_the_leaves_keep_every_character_in_order(doc):
    leaves = [leaf for leaf in split()["documents"] if leaf.meta["doc_id"] == doc]
    assert len(leaves) > 5
    assert "".join(leaf.content for leaf in leaves) == TEXTS[doc]
    assert all(leaf.content == text_of(leaf) for leaf in leaves)


def test_each_parent_is_exactly_its_childrens_text_and_the_tree_meta_links_them():
    result = split()
    blocks = {block.id: block for block in [*result["documents"], *result["parents"]]}
    for parent in result["parents"]:
        children = [blocks[child] for child in parent.meta["__children_ids"]]
        assert len(children) > 1 and parent.content == "".join(child.content for child in children)
        assert parent.content == text_of(parent) and parent.meta["span"] == span_of(parent)
        for child in children:
            assert child.meta["__parent_id"] == parent.id
            assert child.meta["__level"] == parent.meta["__level"] + 1
            assert child.meta["__block_size"] < parent.meta["__block_size"]
    assert all(
        len(leaf.content.strip()) <= 100 for leaf in result["documents"]
    )  # a block that fits is not cut
    assert max(leaf.meta["__level"] for leaf in result["documents"]) == 2
    assert all(leaf.meta["__children_ids"] == [] for leaf in result["documents"])


def test_the_roots_are_the_largest_blocks_never_the_whole_document():
    result = split()
    blocks = sorted([*result["parents"], *result["documents"]], key=span_of)
    roots = [block for block in blocks if block.meta["__parent_id"] is None]
    assert {root.meta["doc_id"] for root in roots} == {"en", "zh"}
    for doc, text in TEXTS.items():
        own = [root for root in roots if root.meta["doc_id"] == doc]
        assert len(own) > 1 and "".join(root.content for root in own) == text
        assert all(len(root.content) <= 600 and root.meta["__level"] == 0 for root in own)
        assert all(root.meta["__block_size"] == 600 for root in own)


def test_every_block_carries_its_documents_meta():
    result = split()
    for block in [*result["documents"], *result["parents"]]:
        source = next(s for s in SOURCES if s.id == block.meta["doc_id"])
        assert source.meta.items() <= block.meta.items()


def test_a_document_that_fits_a_chunk_is_one_leaf_without_a_parent():
    result = split(sources=[Document(id="s", content="Short.", meta={"doc_id": "s"})])
    (leaf,) = result["documents"]
    assert result["parents"] == []
    assert (leaf.id, leaf.meta["__parent_id"], leaf.meta["__level"], leaf.meta["__block_size"]) == (
        "s#0-6",
        None,
        0,
        600,
    )


def test_a_whitespace_only_piece_joins_a_neighbour():
    text = "\n\n\n\n" + "a" * 14 + "\n\n\n\n\n\n" + "b" * 20
    result = BlockHierarchySplitter([20], 8, ["\n\n"]).run(
        documents=[Document(id="d", content=text, meta={"doc_id": "d"})]
    )
    leaves = result["documents"]
    assert "".join(leaf.content for leaf in leaves) == text
    assert all(leaf.content.strip() for leaf in leaves)
    assert all(
        len(parent.meta["__children_ids"]) == sum(leaf.meta["__parent_id"] == parent.id for leaf in leaves)
        for parent in result["parents"]
    )


def test_the_leaves_pass_the_span_locator_unchanged():
    leaves = split()["documents"]
    located = ChunkSpanLocator().run(chunks=leaves, sources=SOURCES)["documents"]
    assert [chunk.id for chunk in located] == [leaf.id for leaf in leaves]
    for chunk in located:
        start, end = chunk.meta["span"]
        assert TEXTS[chunk.meta["doc_id"]][start:end] == chunk.content
        assert "split_idx_start" not in chunk.meta and "__parent_id" in chunk.meta


@pytest.mark.parametrize(
    ("parent_sizes", "chunk_size"), [([], 100), ([300, 300], 100), ([300], 300), ([300], 0)]
)
def test_sizes_that_do_not_strictly_decrease_are_refused(parent_sizes, chunk_size):
    with pytest.raises(ValueError, match="block sizes must strictly decrease"):
        BlockHierarchySplitter(parent_sizes=parent_sizes, chunk_size=chunk_size)


def test_to_dict_holds_every_init_parameter_and_from_dict_restores_them():
    data = BlockHierarchySplitter(
        parent_sizes=[2000, 800], chunk_size=300, separators=["\n\n", "。"]
    ).to_dict()
    assert data == {
        "type": "components.preprocessors.block_hierarchy_splitter.BlockHierarchySplitter",
        "init_parameters": {"parent_sizes": [2000, 800], "chunk_size": 300, "separators": ["\n\n", "。"]},
    }
    assert BlockHierarchySplitter.from_dict(data).to_dict() == data
