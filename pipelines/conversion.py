"""Files -> canonical source Documents (the text every character span in the project refers to)."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from haystack import Document, Pipeline
from haystack.components.converters import HTMLToDocument, PyPDFToDocument, TextFileToDocument
from haystack.components.joiners import DocumentJoiner
from haystack.components.preprocessors import DocumentCleaner
from haystack.components.routers import FileTypeRouter
from tqdm import tqdm

logger = logging.getLogger(__name__)

# Haystack's own mime lookup already maps .md/.markdown to text/markdown (haystack.utils.misc.CUSTOM_MIMETYPES),
# so no mimetypes.add_type() call is needed for the router to see markdown files.
MIME_TYPES = ("text/plain", "text/markdown", "text/html", "application/pdf")
_BATCH = 64
_PROGRESS_ABOVE = 200
_LISTED = 10


def build_conversion_pipeline() -> Pipeline:
    """Route by MIME type, convert, join and lightly clean, so evidence quotes still match the result.

    Markdown goes through TextFileToDocument (not MarkdownToDocument) to keep the raw headings the markdown
    chunker needs. The cleaner only canonicalises (NFC, CRLF -> LF, outer whitespace); it keeps blank lines,
    inner whitespace runs and repeated headers/footers because collapsing them would move paragraph breaks and
    delete text that golden quotes may cite.
    """
    pipeline = Pipeline()
    pipeline.add_component("router", FileTypeRouter(mime_types=list(MIME_TYPES)))
    pipeline.add_component("text_converter", TextFileToDocument())
    pipeline.add_component("html_converter", HTMLToDocument())
    pipeline.add_component("pdf_converter", PyPDFToDocument())
    pipeline.add_component("joiner", DocumentJoiner(join_mode="concatenate", sort_by_score=False))
    pipeline.add_component(
        "cleaner",
        DocumentCleaner(
            remove_empty_lines=False,
            remove_extra_whitespaces=False,
            remove_repeated_substrings=False,
            unicode_normalization="NFC",
            replace_regexes={r"\r\n?": "\n"},
            strip_whitespaces=True,
            min_content_length=1,
        ),
    )
    pipeline.connect("router.text/plain", "text_converter.sources")
    pipeline.connect("router.text/markdown", "text_converter.sources")
    pipeline.connect("router.text/html", "html_converter.sources")
    pipeline.connect("router.application/pdf", "pdf_converter.sources")
    pipeline.connect("text_converter.documents", "joiner.documents")
    pipeline.connect("html_converter.documents", "joiner.documents")
    pipeline.connect("pdf_converter.documents", "joiner.documents")
    pipeline.connect("joiner.documents", "cleaner.documents")
    return pipeline


def convert_files(
    root: Path, paths: Sequence[Path], extra_meta: Mapping[str, Mapping[str, Any]] | None = None
) -> list[Document]:
    """Convert files under `root` into canonical Documents with `id == meta["doc_id"]`, sorted by doc_id.

    `doc_id` is the path relative to `root` with POSIX separators, so ids are the same on every OS.
    `extra_meta` maps a doc_id to metadata merged into that document (tenant, acl, ...).
    Unsupported extensions are skipped with one warning; files that convert to no text are skipped with a
    warning naming them; an empty result is an error.
    """
    root = Path(root)
    extra_meta = extra_meta or {}
    doc_ids = []
    for path in paths:
        try:
            doc_ids.append(Path(path).relative_to(root).as_posix())
        except ValueError:
            raise ValueError(f"{path}: file is not inside the corpus root {root}") from None
    if len(set(doc_ids)) != len(doc_ids):
        raise ValueError(f"{root}: the same file is listed more than once")

    pipeline = build_conversion_pipeline()
    converted: dict[str, Document] = {}
    unsupported: list[str] = []
    failed: list[str] = []
    with tqdm(
        total=len(paths), desc="converting files", unit="file", disable=len(paths) <= _PROGRESS_ABOVE
    ) as bar:
        for start in range(0, len(paths), _BATCH):
            batch_paths = [Path(p) for p in paths[start : start + _BATCH]]
            batch_ids = doc_ids[start : start + _BATCH]
            metas = [{**extra_meta.get(doc_id, {}), "doc_id": doc_id} for doc_id in batch_ids]
            result = pipeline.run({"router": {"sources": batch_paths, "meta": metas}})
            for doc in result.get("cleaner", {}).get("documents", []):
                doc_id = doc.meta["doc_id"]
                converted[doc_id] = Document(id=doc_id, content=doc.content, meta=dict(doc.meta))
            router_out = result.get("router", {})
            unsupported += [_source_id(s, root) for s in router_out.get("unclassified", [])]
            failed += [_source_id(s, root) for s in router_out.get("failed", [])]
            bar.update(len(batch_paths))

    if unsupported:
        suffixes = sorted({Path(doc_id).suffix or "(none)" for doc_id in unsupported})
        logger.warning("%s: skipped %d file(s) with unsupported types %s", root, len(unsupported), suffixes)
    empty = sorted(set(doc_ids) - set(converted) - set(unsupported) - set(failed))
    failed = sorted(set(failed) | set(empty))
    if failed:
        logger.warning(
            "%s: skipped %d file(s) that could not be read or produced no text: %s%s",
            root,
            len(failed),
            ", ".join(failed[:_LISTED]),
            " ..." if len(failed) > _LISTED else "",
        )
    if not converted:
        raise ValueError(
            f"{root}: no documents could be converted from {len(paths)} file(s) (supported: {MIME_TYPES})"
        )
    return [converted[doc_id] for doc_id in sorted(converted)]


def _source_id(source: Any, root: Path) -> str:
    """Name a router-rejected source by its doc_id (ByteStreams carry it in meta, paths are made relative)."""
    meta = getattr(source, "meta", None)
    if meta is not None and "doc_id" in meta:
        return str(meta["doc_id"])
    return Path(source).relative_to(root).as_posix()
