"""Anchor splitter output to the canonical source text: exact spans, stable ids, clean metadata."""

from dataclasses import replace
from typing import Any

from haystack import Document, component, default_from_dict, default_to_dict

# Keys Haystack splitters add for their own bookkeeping; they mean nothing once the chunk has a `span`.
_SPLITTER_KEYS = (
    "_split_overlap",
    "split_idx_start",
    "source_id",
    "parent_id",
    "split_id",
    "page_number",
    "header",
    "parent_headers",
)


@component
class ChunkSpanLocator:
    """
    Give every chunk its `span` in the source document's canonical text and the id `f"{doc_id}#{start}-{end}"`.

    Splitter offsets cannot be trusted on their own: chained splitters (markdown sections, then recursive) report
    `split_idx_start` relative to the section, not the document. So each chunk's text is located in its source:
    first at the splitter's offset (shifted by what the previous chunk of the same parent taught us), then by a
    forward search from the previous chunk's start + 1 (overlapping chunks start before the previous end).
    Chunks of a document arrive in order, so the searches stay close to a moving cursor and the whole run is
    linear in the text.
    """

    def to_dict(self) -> dict[str, Any]:
        """Serialize the component (it has no init parameters)."""
        return default_to_dict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ChunkSpanLocator":
        """Deserialize the component."""
        return default_from_dict(cls, data)

    @component.output_types(documents=list[Document])
    def run(self, chunks: list[Document], sources: list[Document]) -> dict[str, list[Document]]:
        """
        Locate each chunk in its source and return span-anchored copies.

        :param chunks: Splitter output, in document order per source, each with meta `doc_id`.
        :param sources: The canonical documents the chunks were cut from (`id == meta["doc_id"]`).
        :returns: `documents`: chunks with meta `span`, `heading_path` and the source meta; whitespace-only chunks,
            repeats and chunks lying inside the previous chunk of their document are dropped.
        :raises ValueError: if a chunk has no `doc_id`, its source is missing, or its text is not in the source.
        """
        texts = {source.id: source.content or "" for source in sources}
        source_keys = {source.id: set(source.meta) for source in sources}
        # Per doc: start of the previous chunk. Per (doc, splitter parent): source offset of the parent's start.
        previous_start: dict[str, int] = {}
        parent_offset: dict[tuple[str, str | None], int] = {}
        seen_ids: set[str] = set()
        last_kept: dict[str, tuple[int, int]] = {}
        located: list[Document] = []

        for chunk in chunks:
            content = chunk.content or ""
            if not content.strip():
                continue
            doc_id = chunk.meta.get("doc_id")
            if doc_id is None:
                raise ValueError(
                    f"chunks: chunk {chunk.id!r} has no meta 'doc_id'; splitters must copy source meta."
                )
            if doc_id not in texts:
                raise ValueError(
                    f"sources: no source document with id {doc_id!r} for chunk {content[:60]!r}."
                )
            text = texts[doc_id]
            parent = chunk.meta.get("source_id")
            split_start = chunk.meta.get("split_idx_start")

            # Until a parent's offset is learned, only a chunk cut straight from the source has an absolute offset.
            offset = parent_offset.get((doc_id, parent), 0 if parent in (None, doc_id) else None)
            start = self._at_hint(text, content, split_start, offset)
            if start is None:
                start = self._search(text, content, previous_start.get(doc_id))
            if start is None:
                raise ValueError(
                    f"chunks: text of a chunk of doc {doc_id!r} not found in its source: {content[:60]!r}. "
                    "The splitter must not rewrite text (no stripping, cleaning or re-joining)."
                )
            previous_start[doc_id] = start
            if isinstance(split_start, int):
                parent_offset[(doc_id, parent)] = start - split_start

            end = start + len(content)
            chunk_id = f"{doc_id}#{start}-{end}"
            kept_start, kept_end = last_kept.get(doc_id, (-1, -1))
            if chunk_id in seen_ids or kept_start <= start and end <= kept_end:
                continue  # a repeat, or a tail made only of overlap: it adds no text
            seen_ids.add(chunk_id)
            last_kept[doc_id] = (start, end)
            meta = self._clean_meta(chunk.meta, source_keys[doc_id], start, end)
            located.append(replace(chunk, id=chunk_id, meta=meta))

        return {"documents": located}

    @staticmethod
    def _at_hint(text: str, content: str, split_start: Any, offset: int | None) -> int | None:
        """Return the splitter's offset (shifted into the source) when the chunk text really is there."""
        if not isinstance(split_start, int) or offset is None:
            return None
        start = offset + split_start
        if start >= 0 and text.startswith(content, start):
            return start
        return None

    @staticmethod
    def _search(text: str, content: str, previous_start: int | None) -> int | None:
        """Find the chunk after the previous chunk's start; else its nearest occurrence before (a repeat)."""
        if previous_start is None:
            found = text.find(content)
            return None if found < 0 else found
        found = text.find(content, previous_start + 1)
        if found < 0:
            found = text.rfind(content, 0, previous_start + len(content))
        return None if found < 0 else found

    @staticmethod
    def _clean_meta(meta: dict[str, Any], source_keys: set[str], start: int, end: int) -> dict[str, Any]:
        """Keep source meta, turn markdown header keys into `heading_path`, drop splitter bookkeeping.

        A key the source document itself has (a `header` or `page_number` field of the data) is source meta, not
        bookkeeping, and is kept as it is.
        """
        added = {key for key in _SPLITTER_KEYS if key not in source_keys}
        cleaned = {key: value for key, value in meta.items() if key not in added}
        if {"header", "parent_headers"} & added & set(meta):
            headings = [*meta.get("parent_headers", []), meta.get("header", "")]
            cleaned["heading_path"] = [heading for heading in headings if heading]
        else:
            cleaned.setdefault("heading_path", [])
        cleaned["span"] = [start, end]
        return cleaned
