"""Small-to-big retrieval's second half: a retrieved sentence goes to the prompt with the sentences around it."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from haystack import Document, component, default_from_dict, default_to_dict
from haystack.components.retrievers import SentenceWindowRetriever
from haystack.document_stores.types import DocumentStore

from components.common.sentence_units import SENTENCE_ID
from components.context.token_budget import within_budget

# The chunk meta naming a sentence's document (ChunkSpanLocator keeps it; DocumentSplitter's `source_id` it drops).
SOURCE_ID = "doc_id"


@dataclass
class _Window:
    hit: Document  # the best-ranked hit inside it
    source: Any
    first: int  # sentence ids, inclusive
    last: int


@component
class SentenceWindowExpander:
    """
    Widen each hit of a sentence-window index (`SentenceWindowSplitter`) to `window_size` sentences on each side.

    Haystack's `SentenceWindowRetriever` fetches the neighbours from the store in one filtered query and merges
    their text; this wraps it to keep the answer stage's contract, documents in and documents out, ranked. Each hit
    becomes one Document: the window's text, the hit's id, score and meta, and `span` the window's span in the
    source, so evidence found in a neighbour counts for the context. Hits whose windows overlap share one Document,
    at the better-ranked hit's place, spanning both windows; a prompt never holds a sentence twice. With
    `max_tokens`, the windows are kept whole, best first, while they fit that many tokens (`within_budget`).

    ### Usage example
    ```python
    expander = SentenceWindowExpander(document_store=store, window_size=2, max_tokens=1000)
    expander.run(documents=hits)["documents"]  # one widened Document per hit (or per overlapping group)
    ```
    """

    def __init__(
        self, document_store: DocumentStore, window_size: int = 3, max_tokens: int | None = None
    ) -> None:
        """
        :param document_store: The store the sentence-window index was written to.
        :param window_size: Sentences added on each side of a hit.
        :param max_tokens: Tokens of windows handed on, at most (the first window always); None: no cap.
        :raises ValueError: when `window_size` < 1 or `max_tokens` < 1.
        """
        if max_tokens is not None and max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1 or None, got {max_tokens}")
        self.window_size = window_size
        self.max_tokens = max_tokens
        self.retriever = SentenceWindowRetriever(
            document_store, window_size, source_id_meta_field=SOURCE_ID, split_id_meta_field=SENTENCE_ID
        )

    def to_dict(self) -> dict[str, Any]:
        """Serialise the component, the store with its own `to_dict()`."""
        return default_to_dict(
            self,
            document_store=self.retriever.document_store,
            window_size=self.window_size,
            max_tokens=self.max_tokens,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SentenceWindowExpander:
        """Deserialise the component, rebuilding the store from its type."""
        return default_from_dict(cls, data)

    @component.output_types(documents=list[Document])
    def run(self, documents: list[Document]) -> dict[str, list[Document]]:
        """
        :param documents: Hits, best first, each with meta `doc_id`, `sentence_id` and `span`.
        :returns: `documents`: the widened hits, best first, within `max_tokens`.
        :raises ValueError: when a hit lacks `doc_id` or `sentence_id` (it was not indexed by sentences).
        """
        if not documents:
            return {"documents": []}
        fetched = self.retriever.run(retrieved_documents=documents)["context_documents"]
        sentences = {(doc.meta[SOURCE_ID], doc.meta[SENTENCE_ID]): doc for doc in [*documents, *fetched]}
        widened = []
        for window in self._windows(documents):
            parts = [
                sentences[window.source, i]
                for i in range(window.first, window.last + 1)
                if (window.source, i) in sentences
            ]
            spans = [doc.meta["span"] for doc in parts]
            span = [min(s[0] for s in spans), max(s[1] for s in spans)]
            content = SentenceWindowRetriever.merge_documents_text(parts)
            widened.append(replace(window.hit, content=content, meta={**window.hit.meta, "span": span}))
        return {"documents": within_budget(widened, self.max_tokens)}

    def _windows(self, hits: list[Document]) -> list[_Window]:
        """One window per hit, in rank order; a window overlapping earlier ones joins them at the first one's place."""
        windows: list[_Window] = []
        for hit in hits:
            source, sentence = hit.meta[SOURCE_ID], hit.meta[SENTENCE_ID]
            window = _Window(hit, source, sentence - self.window_size, sentence + self.window_size)
            overlapping = [
                w for w in windows if w.source == source and w.first <= window.last and window.first <= w.last
            ]
            if not overlapping:
                windows.append(window)
                continue
            kept = overlapping[0]
            kept.first = min(w.first for w in (window, *overlapping))
            kept.last = max(w.last for w in (window, *overlapping))
            windows = [w for w in windows if w is kept or all(w is not o for o in overlapping)]
        return windows
