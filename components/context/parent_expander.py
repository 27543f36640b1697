"""Small-to-big retrieval with a block tree: retrieved chunks go to the prompt as the larger blocks they were cut
from, once enough of a block's chunks are retrieved."""

from __future__ import annotations

import sys
from dataclasses import replace
from typing import Any

from haystack import Document, component, default_from_dict, default_to_dict
from haystack.components.retrievers import AutoMergingRetriever
from haystack.document_stores.types import DocumentStore

from components.context.token_budget import within_budget
from components.preprocessors.block_hierarchy_splitter import LEVEL, PARENT_ID


@component
class ParentExpander:
    """
    Replace the hits of a block-tree index (`BlockHierarchySplitter`) by their parent blocks, level by level.

    Haystack's `AutoMergingRetriever` does the merging: a parent replaces its retrieved children when more than
    `threshold` of its children are among the hits, then the same one level up. It returns its documents grouped,
    without scores; this wraps it to keep the answer stage's contract, documents in and documents out, ranked.
    Each output takes the place and score of the best hit it holds; a parent keeps that hit's meta with its own
    (its `span` among them, so evidence anywhere in the parent counts for the context), its id and its text.
    Hits of the same parent become one Document, and an output never holds another's text. A hit without a parent
    (a block too short to cut) stays as it is. With `max_tokens`, the outputs are kept whole, best first, while they
    fit that many tokens (`within_budget`).

    `threshold=0` hands over any hit's parent (parent-child retrieval): AutoMergingRetriever takes a threshold in
    (0, 1) and compares the share with `>`, so the smallest positive float lets any one child through.

    ### Usage example
    ```python
    expander = ParentExpander(document_store=parents, threshold=0.5, max_tokens=1000)
    expander.run(documents=hits)["documents"]  # hits and merged parents, best first
    ```
    """

    def __init__(
        self, document_store: DocumentStore, threshold: float = 0.5, max_tokens: int | None = None
    ) -> None:
        """
        :param document_store: The store holding the parent blocks (never the one retrieval searches).
        :param threshold: Share of a parent's children that must be retrieved, more than, for it to replace them.
        :param max_tokens: Tokens of outputs handed on, at most (the first output always); None: no cap.
        :raises ValueError: when `threshold` is not in [0, 1) or `max_tokens` < 1.
        """
        if not 0 <= threshold < 1:
            raise ValueError(f"threshold must be in [0, 1), got {threshold}")
        if max_tokens is not None and max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1 or None, got {max_tokens}")
        self.threshold = threshold
        self.max_tokens = max_tokens
        self.retriever = AutoMergingRetriever(document_store, max(threshold, sys.float_info.min))

    def to_dict(self) -> dict[str, Any]:
        """Serialise the component, the store with its own `to_dict()`."""
        return default_to_dict(
            self,
            document_store=self.retriever.document_store,
            threshold=self.threshold,
            max_tokens=self.max_tokens,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ParentExpander:
        """Deserialise the component, rebuilding the store from its type."""
        return default_from_dict(cls, data)

    @component.output_types(documents=list[Document])
    def run(self, documents: list[Document]) -> dict[str, list[Document]]:
        """
        :param documents: Hits, best first, each with meta `doc_id`, `span` and the tree meta.
        :returns: `documents`: the hits and the parents that replaced some of them, best first, within `max_tokens`.
        :raises ValueError: when a hit has no tree meta (it was not indexed as a block tree).
        """
        if not documents:
            return {"documents": []}
        if missing := [doc.id for doc in documents if LEVEL not in doc.meta]:
            raise ValueError(
                f"documents {missing} have no '{LEVEL}': they were not indexed by BlockHierarchySplitter"
            )
        children = [doc for doc in documents if doc.meta.get(PARENT_ID)]
        merged = self.retriever.run(documents=children)["documents"] if children else []
        outputs = [*merged, *(doc for doc in documents if not doc.meta.get(PARENT_ID))]
        ranked: dict[str, tuple[int, Document]] = {}
        for output in outputs:
            rank = next(i for i, hit in enumerate(documents) if _holds(output, hit))
            hit = documents[rank]
            expanded = replace(
                hit,
                id=output.id,
                content=output.content,
                embedding=output.embedding,
                meta={**hit.meta, **output.meta},
            )
            ranked.setdefault(output.id, (rank, expanded))
        expanded = [doc for _, doc in sorted(ranked.values(), key=lambda pair: pair[0])]
        return {"documents": within_budget(expanded, self.max_tokens)}


def _holds(block: Document, hit: Document) -> bool:
    """Whether `hit` lies inside `block` (the same document, a span within its span)."""
    (start, end), (hit_start, hit_end) = block.meta["span"], hit.meta["span"]
    return block.meta["doc_id"] == hit.meta["doc_id"] and start <= hit_start and hit_end <= end
