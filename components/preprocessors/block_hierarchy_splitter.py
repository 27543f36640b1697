"""Blocks of decreasing size, each cut from the one above it: the tree that parent-child and auto-merging retrieval
index by its smallest blocks and hand to the prompt by its larger ones."""

from __future__ import annotations

from copy import deepcopy
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from haystack import Document, component, default_from_dict, default_to_dict
from haystack.components.preprocessors import RecursiveDocumentSplitter

# HierarchicalDocumentSplitter's tree meta, which AutoMergingRetriever reads.
PARENT_ID, CHILDREN_IDS, LEVEL, BLOCK_SIZE = "__parent_id", "__children_ids", "__level", "__block_size"


@dataclass
class _Block:
    start: int
    end: int
    level: int
    size: int
    parent: _Block | None = None
    children: list[_Block] = field(default_factory=list)


@component
class BlockHierarchySplitter:
    """
    Cut each document into blocks of `parent_sizes[0]` characters, each of those into blocks of the next size, and
    so on down to `chunk_size`: the tree Haystack's `HierarchicalDocumentSplitter` builds, with its meta
    (`__parent_id`, `__children_ids`, `__level`, `__block_size`), so `AutoMergingRetriever` reads it unchanged.

    That splitter cuts by words or NLTK sentences: a Chinese text has no spaces and punkt is not available offline.
    Here each level is cut by Haystack's `RecursiveDocumentSplitter` in characters on the run's separators, without
    overlap, so a block's text is exactly its children's and every character of the document is in one leaf. A
    whitespace-only piece joins the piece before it (a leaf made of it would be dropped by the span locator and
    leave its parent counting a child that is never retrieved). The tree's roots are the largest blocks, never the
    whole document; a block that fits the next size is not cut again and is a leaf at its own level, as in
    Haystack. Every block's id is `f"{document id}#{start}-{end}"`, the id ChunkSpanLocator gives the leaves.

    ### Usage example
    ```python
    splitter = BlockHierarchySplitter(parent_sizes=[1500], chunk_size=300, separators=["\\n\\n", "。", ". "])
    result = splitter.run(documents=[Document(id="a", content=text, meta={"doc_id": "a"})])
    result["documents"]  # the leaves, to index; result["parents"]: the blocks above them, with meta `span`
    ```
    """

    def __init__(self, parent_sizes: list[int], chunk_size: int, separators: list[str] | None = None) -> None:
        """
        :param parent_sizes: Characters per block of each level above the leaves, largest first.
        :param chunk_size: Characters per leaf, the blocks that are indexed.
        :param separators: RecursiveDocumentSplitter's, tried in order; None: its defaults.
        :raises ValueError: when there is no parent size or the sizes do not strictly decrease to `chunk_size` > 0.
        """
        sizes = [*parent_sizes, chunk_size]
        if not parent_sizes or chunk_size < 1 or any(a <= b for a, b in pairwise(sizes)):
            raise ValueError(
                f"block sizes must strictly decrease to chunk_size >= 1, got {parent_sizes} then {chunk_size}"
            )
        self.parent_sizes = list(parent_sizes)
        self.chunk_size = chunk_size
        self.separators = separators
        self.splitters = {
            size: RecursiveDocumentSplitter(
                split_length=size, split_overlap=0, split_unit="char", separators=separators
            )
            for size in sizes
        }

    def warm_up(self) -> None:
        """Warms the level splitters (a "sentence" separator loads NLTK's tokenizer)."""
        for splitter in self.splitters.values():
            splitter.warm_up()

    def to_dict(self) -> dict[str, Any]:
        """Serialise the component."""
        return default_to_dict(
            self, parent_sizes=self.parent_sizes, chunk_size=self.chunk_size, separators=self.separators
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BlockHierarchySplitter:
        """Deserialise the component."""
        return default_from_dict(cls, data)

    @component.output_types(documents=list[Document], parents=list[Document])
    def run(self, documents: list[Document]) -> dict[str, list[Document]]:
        """
        :param documents: Source documents.
        :returns: `documents`: the leaves in document order, with the source meta, the tree meta and, for the span
            locator, `source_id` and `split_idx_start`; `parents`: the blocks that have children, with the source
            meta, the tree meta and `span`.
        """
        leaves: list[Document] = []
        parents: list[Document] = []
        for source in documents:
            for block in self._tree(source.content or ""):
                if block.children:
                    parents.append(self._document(source, block, {"span": [block.start, block.end]}))
                else:
                    leaves.append(
                        self._document(
                            source, block, {"source_id": source.id, "split_idx_start": block.start}
                        )
                    )
        return {"documents": leaves, "parents": parents}

    def _tree(self, text: str) -> list[_Block]:
        """Every block of `text` in document order, each parent just before its children."""
        sizes = [*self.parent_sizes, self.chunk_size]
        roots = [_Block(start, end, 0, sizes[0]) for start, end in self._pieces(text, 0, sizes[0])]
        level = roots
        for size in sizes[1:]:
            below = []
            for block in level:
                pieces = self._pieces(text[block.start : block.end], block.start, size)
                if len(pieces) == 1:  # it fits: a leaf at its own level
                    below.append(block)
                    continue
                block.children = [_Block(start, end, block.level + 1, size, block) for start, end in pieces]
                below.extend(block.children)
            level = below
        return [block for root in roots for block in self._walk(root)]

    def _pieces(self, text: str, offset: int, size: int) -> list[tuple[int, int]]:
        """`text` cut in pieces of at most `size` characters, as spans from `offset`; a whitespace-only piece joins
        the one before it (the first, the one after it), so a piece may pass `size` by that whitespace."""
        if not text:
            return []
        pieces: list[tuple[int, int]] = []
        for split in self.splitters[size].run(documents=[Document(content=text)])["documents"]:
            start = offset + split.meta["split_idx_start"]
            end = start + len(split.content or "")
            if pieces and (not (split.content or "").strip() or not text[: start - offset].strip()):
                pieces[-1] = (pieces[-1][0], end)
            else:
                pieces.append((start, end))
        return pieces

    def _walk(self, block: _Block) -> list[_Block]:
        return [block, *(node for child in block.children for node in self._walk(child))]

    @staticmethod
    def _document(source: Document, block: _Block, extra: dict[str, Any]) -> Document:
        def block_id(node: _Block) -> str:
            return f"{source.id}#{node.start}-{node.end}"

        tree = {
            PARENT_ID: block_id(block.parent) if block.parent else None,
            CHILDREN_IDS: [block_id(child) for child in block.children],
            LEVEL: block.level,
            BLOCK_SIZE: block.size,
        }
        content = (source.content or "")[block.start : block.end]
        return Document(id=block_id(block), content=content, meta={**deepcopy(source.meta), **extra, **tree})
