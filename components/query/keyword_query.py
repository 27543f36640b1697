"""A question cut down to its content words: the query a keyword search (BM25) matches best."""

from __future__ import annotations

from typing import Any

from haystack import component, default_from_dict, default_to_dict

from components.query.history_rewriter import key_terms

# English question words and auxiliaries that BM25's stopword list keeps; they match any question-shaped chunk.
QUESTION_WORDS = frozenset({
    "what", "which", "who", "whom", "whose", "when", "where", "why", "how", "many", "much", "do", "does", "did",
    "can", "could", "should", "would", "will", "may", "might", "must", "get", "got",
})


@component
class KeywordQuery:
    """
    Keeps the content words of the question (jieba words for Chinese), without stopwords or question words.

    CRAG rewrites the question into keywords before its supplementary search; offline this needs no model.
    A question with no content word is kept as it is.

    ### Usage example
    ```python
    KeywordQuery().run(query="How many days of annual leave do part-time staff get?")["query"]
    # "days annual leave part time staff"
    ```
    """

    def __init__(self, max_terms: int = 12) -> None:
        """:param max_terms: At most this many words, in the question's order."""
        if max_terms < 1:
            raise ValueError(f"max_terms must be >= 1, got {max_terms}")
        self.max_terms = max_terms

    def to_dict(self) -> dict[str, Any]:
        """Serialise the component."""
        return default_to_dict(self, max_terms=self.max_terms)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> KeywordQuery:
        """Deserialise the component."""
        return default_from_dict(cls, data)

    @component.output_types(query=str)
    def run(self, query: str) -> dict[str, str]:
        """:returns: `query`: the keywords joined by spaces, or the question when it has none."""
        terms = [t for t in key_terms(query) if t not in QUESTION_WORDS][: self.max_terms]
        return {"query": " ".join(terms) if terms else query}
