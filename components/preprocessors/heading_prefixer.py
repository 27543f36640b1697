"""Prepend a chunk's heading path to its text, so retrievers and embedders see the section context."""

from dataclasses import replace
from typing import Any

from haystack import Document, component, default_from_dict, default_to_dict


@component
class HeadingPrefixer:
    """
    Prefix each chunk's content with `"h1 > h2 > h3\\n"` from its meta `heading_path`.

    Only `content` changes; `span` still points at the unprefixed text in the source. `enabled=False` passes
    chunks through untouched, so heading prefixes can be ablated from config rather than code.
    """

    def __init__(self, enabled: bool = True, separator: str = " > ") -> None:
        """
        Create the prefixer.

        :param enabled: Whether to add the prefix at all.
        :param separator: Put between the headings of the path.
        :raises ValueError: if `separator` contains a newline (the prefix must stay one line).
        """
        if "\n" in separator:
            raise ValueError(f"separator must not contain a newline, got {separator!r}.")
        self.enabled = enabled
        self.separator = separator

    def to_dict(self) -> dict[str, Any]:
        """Serialize the component."""
        return default_to_dict(self, enabled=self.enabled, separator=self.separator)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "HeadingPrefixer":
        """Deserialize the component."""
        return default_from_dict(cls, data)

    @component.output_types(documents=list[Document])
    def run(self, documents: list[Document]) -> dict[str, list[Document]]:
        """
        Prefix the chunks that have a heading path.

        A chunk that already opens with its own (last) heading line, as the first chunk of a markdown section does,
        is left as is so the heading is not repeated.

        :param documents: Chunks with meta `heading_path` (missing or empty means no prefix).
        :returns: `documents`: prefixed copies (same ids and meta), or the input itself when disabled.
        """
        if not self.enabled:
            return {"documents": documents}
        prefixed = []
        for doc in documents:
            path = doc.meta.get("heading_path") or []
            content = doc.content or ""
            if not path or self._opens_with_heading(content, path[-1]):
                prefixed.append(doc)
                continue
            prefix = self.separator.join(path) + "\n"
            prefixed.append(replace(doc, content=prefix + content, meta=dict(doc.meta)))
        return {"documents": prefixed}

    @staticmethod
    def _opens_with_heading(content: str, heading: str) -> bool:
        """Whether the first non-blank line is `heading`, as a markdown heading (`## heading`) or plain text."""
        first_line = content.lstrip().split("\n", 1)[0]
        return first_line.lstrip("#").strip() == heading.strip()
