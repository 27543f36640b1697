"""A set's corpus files in its spec's corpus_format, and their text as the product converts them at index time.

text: a section's body as a .txt file, heading left out. html: a small page with the section's heading and the
page's own elements, which the product's HTML converter turns into Markdown (headings, tables as Markdown tables).
docx: that Markdown as a Word file (docx_files), which Haystack's DOCXToDocument reads. The evidence of
hand-written questions is located in the converted text, so a quote locates as the product will read it.
"""

from __future__ import annotations

import html
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from components.converters.html_to_markdown_document import html_to_markdown
from experiments.datasets.doc_sets.docx_files import markdown_docx
from experiments.datasets.doc_sets.errors import DocSetError
from experiments.datasets.doc_sets.html_sections import Section
from pipelines.conversion import convert_files


def corpus_files(corpus_format: str, documents: Sequence[tuple[str, Section]]) -> dict[str, bytes]:
    """doc id -> the bytes of its file in `corpus_format` (specs.CORPUS_SUFFIXES), in the given order."""
    writers = {"text": _text_file, "html": html_page, "docx": _docx_file}
    return {doc_id: writers[corpus_format](section) for doc_id, section in documents}


def html_page(section: Section) -> bytes:
    """A UTF-8 page: the section's heading at its own level, then its content as the page's HTML."""
    heading = html.escape(section.heading, quote=False)
    return (
        '<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>'
        f"{heading}</title></head>\n<body>\n<h{section.level}>{heading}</h{section.level}>\n{section.html}\n"
        "</body></html>\n"
    ).encode()


def converted_texts(files: Mapping[str, bytes]) -> dict[str, str]:
    """doc id -> its text as `dataset=local` converts the file; DocSetError naming the files it would skip."""
    with tempfile.TemporaryDirectory(prefix="ragtune-doc-set-") as folder:
        root = Path(folder)
        paths = []
        for doc_id, data in files.items():
            path = root / doc_id
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            paths.append(path)
        documents, skipped = convert_files(root, paths)
    if skipped:
        listed = "; ".join(f"{doc_id}: {reason}" for doc_id, reason in list(skipped.items())[:5])
        raise DocSetError(f"{len(skipped)} corpus file(s) would be skipped at index time: {listed}")
    return {document.id: document.content or "" for document in documents}


def _text_file(section: Section) -> bytes:
    return (section.body + "\n").encode("utf-8")


def _docx_file(section: Section) -> bytes:
    return markdown_docx(html_to_markdown(html_page(section)), section.heading)
