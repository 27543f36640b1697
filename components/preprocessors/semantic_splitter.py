"""Semantic chunking (`ingest=semantic`): cut where the run's embedder sees the topic shift, over CJK-aware sentence
units."""

from __future__ import annotations

from typing import Any

from haystack import component, default_to_dict
from haystack.components.embedders.types import DocumentEmbedder
from haystack.components.preprocessors import EmbeddingBasedDocumentSplitter
from haystack.core.serialization import component_to_dict

from components.common.sentence_units import sentence_units

# Project modules whose code shapes this component's chunks besides its own: the index fingerprint hashes them too.
INDEX_CODE = ("components.common.sentence_units",)


@component
class SemanticDocumentSplitter(EmbeddingBasedDocumentSplitter):
    """
    Haystack's `EmbeddingBasedDocumentSplitter` over `sentence_units` instead of NLTK's punkt.

    Punkt must be downloaded (the parent's warm-up tries to) and knows no Chinese; the units know CJK terminators
    and keep every character, so the chunks still join back to the source and `split_idx_start` stays exact. Only
    the sentence step is replaced: `_prepare_sentence_groups`, the one method both `run` and `run_async` cut text
    with (since Haystack 2.26, unchanged in 3.x), and the warm-ups, which then warm the embedder alone. The
    embedder's progress bar is turned off: it embeds one document's sentence groups per call, a bar each.

    ### Usage example
    ```python
    splitter = SemanticDocumentSplitter(document_embedder=E5DocumentEmbedder(), min_length=100, max_length=500)
    splitter.warm_up()
    splitter.run(documents=[Document(content="年假有15天。病假另计！The VPN needs a token.")])["documents"]
    ```
    """

    def __init__(
        self,
        *,
        document_embedder: DocumentEmbedder,
        sentences_per_group: int = 3,
        percentile: float = 0.95,
        min_length: int = 50,
        max_length: int = 1000,
    ) -> None:
        """
        :param document_embedder: Embeds the sentence groups (the run's document embedder).
        :param sentences_per_group: Sentence units embedded together.
        :param percentile: A distance between neighbouring groups above this percentile of the document's is a cut.
        :param min_length: Characters under which a split joins the next (if the two stay under `max_length`).
        :param max_length: Characters over which a split is cut again, the same way, while it can be.
        :raises ValueError: as the parent's: `sentences_per_group` < 1, `percentile` outside [0, 1], `min_length`
            < 0, or `max_length` <= `min_length`.
        """
        # Not super(): @component rebuilds the class, so the zero-argument form names the class before it.
        EmbeddingBasedDocumentSplitter.__init__(
            self,
            document_embedder=document_embedder,
            sentences_per_group=sentences_per_group,
            percentile=percentile,
            min_length=min_length,
            max_length=max_length,
        )
        if hasattr(document_embedder, "progress_bar"):
            document_embedder.progress_bar = False

    def warm_up(self) -> None:
        """Warm up the embedder; the units need nothing (the parent would load punkt here)."""
        if hasattr(self.document_embedder, "warm_up"):
            self.document_embedder.warm_up()

    async def warm_up_async(self) -> None:
        """Warm up the embedder on the serving event loop; the units need nothing."""
        if hasattr(self.document_embedder, "warm_up_async"):
            await self.document_embedder.warm_up_async()
        else:
            self.warm_up()

    def _prepare_sentence_groups(self, text: str) -> list[str]:
        """`text` as groups of `sentences_per_group` sentence units, joining back to it exactly."""
        return self._group_sentences(sentence_units(text))

    def to_dict(self) -> dict[str, Any]:
        """Serialise the component (the parent's `from_dict` restores it)."""
        return default_to_dict(
            self,
            document_embedder=component_to_dict(obj=self.document_embedder, name="document_embedder"),
            sentences_per_group=self.sentences_per_group,
            percentile=self.percentile,
            min_length=self.min_length,
            max_length=self.max_length,
        )
