"""Sentences as the units of a sentence-window index (small-to-big retrieval): each is retrieved alone, and
`SentenceWindowExpander` hands the prompt its neighbours."""

from __future__ import annotations

from functools import partial
from typing import Any

from haystack import Document, component, default_from_dict, default_to_dict
from haystack.components.preprocessors import DocumentSplitter

from components.common.sentence_units import SENTENCE_ID, sentence_units

# Project modules whose code shapes this component's chunks besides its own: the index fingerprint hashes them too.
INDEX_CODE = ("components.common.sentence_units",)


@component
class SentenceWindowSplitter:
    """
    Cut documents into sentences (CJK-aware, `sentence_units`), numbered in order within each document.

    Haystack's `DocumentSplitter(split_by="function")` does the splitting and its bookkeeping (`source_id`,
    `split_id`, `split_idx_start`); its "sentence" mode needs NLTK's punkt, which is not available offline and knows
    no Chinese. The units keep every character, whitespace included, so `split_idx_start` is exact and every unit
    locates in its source. A unit shorter than `min_chars` joins its neighbour, so a heading or a "Yes." is never
    retrieved alone.

    ### Usage example
    ```python
    SentenceWindowSplitter(min_chars=20).run(documents=[Document(content="年假有15天。病假另计！")])["documents"]
    ```
    """

    def __init__(self, min_chars: int = 20) -> None:
        """
        :param min_chars: Non-blank characters a unit needs; a shorter one joins the next (the last, the previous).
        :raises ValueError: when `min_chars` < 0.
        """
        if min_chars < 0:
            raise ValueError(f"min_chars must be >= 0, got {min_chars}")
        self.min_chars = min_chars
        self.splitter = DocumentSplitter(
            split_by="function", splitting_function=partial(sentence_units, min_chars=min_chars)
        )

    def to_dict(self) -> dict[str, Any]:
        """Serialise the component."""
        return default_to_dict(self, min_chars=self.min_chars)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SentenceWindowSplitter:
        """Deserialise the component."""
        return default_from_dict(cls, data)

    @component.output_types(documents=list[Document])
    def run(self, documents: list[Document]) -> dict[str, list[Document]]:
        """
        :param documents: Source documents.
        :returns: `documents`: their sentence units in order, with DocumentSplitter's meta and `sentence_id`.
        """
        units = self.splitter.run(documents=documents)["documents"]
        for unit in units:
            unit.meta[SENTENCE_ID] = unit.meta["split_id"]
        return {"documents": units}
