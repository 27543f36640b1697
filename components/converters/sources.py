"""What the structure-aware converters share: read each source, convert its bytes, skip (and log) a file that fails."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from haystack import Document, logging
from haystack.components.converters.utils import get_bytestream_from_source, normalize_metadata
from haystack.dataclasses import ByteStream

logger = logging.getLogger(__name__)


def convert_sources(
    sources: list[str | Path | ByteStream],
    meta: dict[str, Any] | list[dict[str, Any]] | None,
    convert: Callable[[bytes], str],
    kind: str,
) -> list[Document]:
    """One Document per source whose bytes `convert` turns into text, with the metadata Haystack's converters give
    (the stream's, then `meta`; `file_path` the stream's file name). A file that fails or yields no text is logged
    and left out, as Haystack's converters do, so the caller can report it as "no text extracted"."""
    documents = []
    for source, metadata in zip(sources, normalize_metadata(meta, sources_count=len(sources)), strict=True):
        try:
            stream = get_bytestream_from_source(source)
            text = convert(stream.data)
        except Exception as error:  # any parser error of one file must not stop the corpus
            logger.warning(
                "Could not convert {kind} {source}, skipping it: {error}",
                kind=kind,
                source=source,
                error=error,
            )
            continue
        if not text.strip():
            logger.warning(
                "No text could be extracted from {kind} {source}, skipping it.", kind=kind, source=source
            )
            continue
        merged = {**stream.meta, **metadata}
        if stream.meta.get("file_path"):
            merged["file_path"] = os.path.basename(stream.meta["file_path"])
        documents.append(Document(content=text, meta=merged))
    return documents
