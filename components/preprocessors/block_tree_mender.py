"""The block tree of a parent-child or hierarchical index made whole again after `ChunkGuard` changed its leaves, so
auto-merging counts the chunks that are indexed."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from haystack import Document, component, default_from_dict, default_to_dict

from components.preprocessors.block_hierarchy_splitter import BLOCK_SIZE, CHILDREN_IDS, LEVEL, PARENT_ID


@dataclass
class _BlockNode:
    doc: Document  # a guarded leaf, or a parent block as BlockHierarchySplitter cut it
    parent: str | None  # the id of the parent it was cut from
    leaf: bool
    kids: list[_BlockNode] = field(default_factory=list)
    span: tuple[int, int] = (0, 0)
    id: str = ""


@component
class BlockTreeMender:
    """
    Re-link a block tree (`BlockHierarchySplitter`) to the leaves `ChunkGuard` made of its chunks.

    The guard merges leaves that cut a code block or a table (or are too short) and cuts a long block into pieces:
    a parent's `__children_ids` would name leaves that are no longer indexed, and a merged leaf can reach into the
    next parent, so `AutoMergingRetriever` would count a parent's share wrongly, or find no parent at all. Here each
    leaf belongs to the parent its `__parent_id` names, the block its start lay in (a chunk the guard makes keeps
    the meta of the chunk it starts in). From the deepest level up, a parent becomes the span of its children; one
    left with no child is dropped, and one left with a single child is that child, as a block that fits is not cut
    (its place, level and block size go to the child). Every block then gets its depth as level. A rebuilt parent
    keeps its meta (its document's, access fields included) with its new span, text, id and children; a document
    the guard left alone keeps its tree, block for block.

    ### Usage example
    ```python
    tree = BlockTreeMender().run(documents=guarded_leaves, parents=splitter_parents, sources=documents)
    tree["documents"], tree["parents"]  # the leaves to index, the blocks above them
    ```
    """

    def to_dict(self) -> dict[str, Any]:
        """Serialise the component."""
        return default_to_dict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BlockTreeMender:
        """Deserialise the component."""
        return default_from_dict(cls, data)

    @component.output_types(documents=list[Document], parents=list[Document])
    def run(
        self, documents: list[Document], parents: list[Document], sources: list[Document]
    ) -> dict[str, list[Document]]:
        """
        :param documents: The guarded leaves, with meta `doc_id`, `span` and the tree meta.
        :param parents: The splitter's blocks above its leaves, with meta `doc_id`, `span` and the tree meta.
        :param sources: The documents they were cut from (`id == meta["doc_id"]`).
        :returns: `documents`: the leaves, each document's in span order; `parents`: the blocks above them, each
            before its children.
        :raises ValueError: when a leaf names a parent that is not among `parents`, or a source is missing.
        """
        texts = {source.id: source.content or "" for source in sources}
        leaves: dict[str, list[Document]] = {}
        blocks: dict[str, list[Document]] = {}
        for doc in documents:
            leaves.setdefault(doc.meta["doc_id"], []).append(doc)
        for doc in parents:
            blocks.setdefault(doc.meta["doc_id"], []).append(doc)
        mended: dict[str, list[Document]] = {"documents": [], "parents": []}
        for doc_id in dict.fromkeys([*leaves, *blocks]):
            if doc_id not in texts:
                raise ValueError(f"sources: no source document with id {doc_id!r}")
            tree = _BlockTree(doc_id, texts[doc_id], leaves.get(doc_id, []), blocks.get(doc_id, []))
            mended["documents"] += tree.leaves
            mended["parents"] += tree.parents
        return mended


class _BlockTree:
    """One document's tree, mended on construction: `leaves` and `parents` in document order."""

    def __init__(self, doc_id: str, text: str, leaves: list[Document], parents: list[Document]) -> None:
        self.doc_id, self.text = doc_id, text
        self.sizes = {doc.meta[LEVEL]: doc.meta[BLOCK_SIZE] for doc in [*leaves, *parents]}
        self.leaves: list[Document] = []
        self.parents: list[Document] = []
        for root in sorted(self._roots(leaves, parents), key=lambda node: node.span):
            self._emit(root, None, 0)

    def _roots(self, leaves: list[Document], parents: list[Document]) -> list[_BlockNode]:
        """The nodes without a parent once every parent holds its children's span, deepest level first."""
        cut = {doc.id: _BlockNode(doc, doc.meta[PARENT_ID], leaf=False) for doc in parents}
        roots: list[_BlockNode] = []

        def attach(node: _BlockNode) -> None:
            if node.parent is None:
                roots.append(node)
            elif node.parent in cut:
                cut[node.parent].kids.append(node)
            else:
                raise ValueError(
                    f"{node.doc.id!r} names parent {node.parent!r}, which is not among the parents"
                )

        for doc in leaves:
            start, end = doc.meta["span"]
            attach(_BlockNode(doc, doc.meta.get(PARENT_ID), leaf=True, span=(start, end), id=doc.id))
        for node in sorted(cut.values(), key=lambda node: -node.doc.meta[LEVEL]):
            node.kids.sort(key=lambda kid: kid.span)
            if len(node.kids) == 1:  # the block is its only child's: that child takes its place
                only = node.kids[0]
                only.parent = node.parent
                attach(only)
            elif node.kids:
                node.span = (node.kids[0].span[0], max(kid.span[1] for kid in node.kids))
                node.id = f"{self.doc_id}#{node.span[0]}-{node.span[1]}"
                attach(node)
        return roots

    def _emit(self, node: _BlockNode, parent_id: str | None, level: int) -> None:
        """The node's document, the original where its tree meta and span are unchanged, then its children's."""
        tree = {
            PARENT_ID: parent_id,
            CHILDREN_IDS: [kid.id for kid in node.kids],
            LEVEL: level,
            BLOCK_SIZE: self.sizes[level],
        }
        doc = node.doc
        if any(doc.meta.get(key) != value for key, value in tree.items()) or doc.id != node.id:
            if node.leaf:
                doc = replace(doc, meta={**doc.meta, **tree})
            else:
                content = self.text[node.span[0] : node.span[1]]
                doc = Document(
                    id=node.id, content=content, meta={**doc.meta, **tree, "span": list(node.span)}
                )
        (self.leaves if node.leaf else self.parents).append(doc)
        for kid in node.kids:
            self._emit(kid, node.id, level + 1)
