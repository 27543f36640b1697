"""A context's token budget after the expand slot: whole passages, best first, counted as `context/tokens` counts."""

from __future__ import annotations

from haystack import Document

from components.common.words import answer_tokens


def token_count(text: str) -> int:
    """Tokens as `context/tokens`, the index-structure benchmark and a context's budget count them: normalised words,
    jieba words for Chinese (`answer_tokens`), so a budget means the same in both languages and for every generator."""
    return len(answer_tokens(text))


def within_budget(documents: list[Document], max_tokens: int | None) -> list[Document]:
    """The documents, best first, while their tokens fit `max_tokens` (None: all of them). A passage is never cut,
    so the first that does not fit ends the context; the first is kept whatever its size, as `ContextWindow` keeps
    its first chunk, so that a context is never empty."""
    if max_tokens is None:
        return documents
    kept: list[Document] = []
    used = 0
    for doc in documents:
        size = token_count(doc.content or "")
        if kept and used + size > max_tokens:
            break
        kept.append(doc)
        used += size
    return kept
