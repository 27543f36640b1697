"""Cut the ranked candidates down to what the prompt gets: the step between retrieval and generation."""

from __future__ import annotations

from typing import Any

from haystack import Document, component, default_from_dict, default_to_dict


@component
class ContextWindow:
    """
    Keep the first `top_k` documents, and stop earlier once `max_chars` of content would be exceeded.

    Evaluation reads its output as the `context/` layer, so a relevant chunk ranked below the window shows up
    as a cutoff miss in the diagnosis rather than as a generation failure.

    ### Usage example
    ```python
    ContextWindow(top_k=3).run(documents=ranked)["documents"]  # ranked[:3]
    ```
    """

    def __init__(self, top_k: int = 3, max_chars: int | None = None) -> None:
        """
        :param top_k: Most documents passed on.
        :param max_chars: Content budget in characters; the first document is always kept.
        :raises ValueError: when `top_k` < 1 or `max_chars` < 1.
        """
        if top_k < 1:
            raise ValueError(f"top_k must be >= 1, got {top_k}")
        if max_chars is not None and max_chars < 1:
            raise ValueError(f"max_chars must be >= 1 or None, got {max_chars}")
        self.top_k = top_k
        self.max_chars = max_chars

    def to_dict(self) -> dict[str, Any]:
        """Serialise the component."""
        return default_to_dict(self, top_k=self.top_k, max_chars=self.max_chars)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ContextWindow:
        """Deserialise the component."""
        return default_from_dict(cls, data)

    @component.output_types(documents=list[Document])
    def run(self, documents: list[Document]) -> dict[str, list[Document]]:
        """
        :param documents: Ranked documents, best first.
        :returns: `documents`: the prefix that fits the window.
        """
        kept: list[Document] = []
        used = 0
        for doc in documents[: self.top_k]:
            size = len(doc.content or "")
            if kept and self.max_chars is not None and used + size > self.max_chars:
                break
            kept.append(doc)
            used += size
        return {"documents": kept}
