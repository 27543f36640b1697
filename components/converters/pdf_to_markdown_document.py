"""PDF -> text whose outline entries are Markdown headings and whose ruled tables are Markdown tables.

Each page is read with pypdf as Haystack's PyPDFToDocument reads it (pages joined by a form feed), so a PDF without
an outline or tables gives the same text as before, but for a space before a line that would read as a Markdown
heading. pdfplumber finds the tables, those drawn with ruling lines (its default "lines" strategy); a page holding
one is read by pdfplumber instead, its lines and tables ordered from the top.
"""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any, NamedTuple

import pdfplumber
from haystack import Document, component, default_from_dict, default_to_dict, logging
from haystack.dataclasses import ByteStream
from pypdf import PdfReader

from components.converters.markdown_text import markdown_table, no_stray_headings
from components.converters.sources import convert_sources

logger = logging.getLogger(__name__)

# What the text may print before an outline title that lacks it: "Appendix ", "Chapter 3. ", "2.1 ", "A. ", "IV. ".
_NUMBERING = r"(?:(?i:chapter|appendix|part|section)[ \t]+)?(?:[0-9A-Z]{1,4}(?:\.[0-9]{1,3})*\.?[ \t]+)?"


class OutlineHeading(NamedTuple):
    """An outline entry: its depth (1 = top), title, 0-based page and whether it points at the page's top."""

    level: int
    title: str
    page: int
    page_top: bool


@component
class PDFToMarkdownDocument:
    """
    Convert PDF files to Documents: pypdf's text of each page, pages separated by a form feed (and a line break
    when the page opens with a heading, which the markdown chunker only reads at a line's start), where

    - each outline (bookmark) entry whose title stands on its own line(s) of its page becomes a Markdown heading
      there (`#` per outline level, at most six), the title as the page prints it; a title the page's text lacks
      becomes a heading line at the start of the page when the entry points at the page itself, else it is left out;
    - each table drawn with ruling lines, of two rows and two columns at least, becomes a Markdown table (merged
      cells come out empty); a page holding one is read by pdfplumber, its other lines around the table by height.

    Tables without ruling lines stay text, and a scanned page (no text layer) yields no text: nothing here runs OCR.
    """

    def to_dict(self) -> dict[str, Any]:
        """Serialize the component (it has no init parameters)."""
        return default_to_dict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PDFToMarkdownDocument:
        """Deserialize the component."""
        return default_from_dict(cls, data)

    @component.output_types(documents=list[Document])
    def run(
        self,
        sources: list[str | Path | ByteStream],
        meta: dict[str, Any] | list[dict[str, Any]] | None = None,
    ) -> dict[str, list[Document]]:
        """
        Convert each PDF source; one that cannot be read or has no text is logged and left out.

        :param sources: PDF file paths or ByteStreams.
        :param meta: Metadata for every Document (a dict) or per source (a list as long as `sources`).
        :returns: `documents`: one per converted source, its metadata the stream's merged with `meta`.
        """
        return {"documents": convert_sources(sources, meta, pdf_to_markdown, "PDF file")}


def pdf_to_markdown(data: bytes) -> str:
    """The text of a PDF (see PDFToMarkdownDocument)."""
    reader = PdfReader(io.BytesIO(data))
    pages = [page.extract_text(extraction_mode="plain") for page in reader.pages]
    try:
        pages = _with_tables(data, pages)
    except Exception as error:  # pdfplumber failing on a file pypdf reads must not lose its text
        logger.warning(
            "Could not look for tables in a PDF, keeping its text without them: {error}", error=error
        )
    pages = with_headings([no_stray_headings(page) for page in pages], outline_headings(reader))
    # The markdown chunker reads a heading only at a line's start: a page opening with one gets a line break too.
    return "\f".join(
        f"\n{page}" if number and page.startswith("#") else page for number, page in enumerate(pages)
    )


def _with_tables(data: bytes, pages: list[str]) -> list[str]:
    """`pages` with the text of every page holding a ruled table read again by pdfplumber, tables as Markdown."""
    pages = list(pages)
    with pdfplumber.open(io.BytesIO(data)) as pdf:
        for number, page in enumerate(pdf.pages):
            tables = [(table, markdown_table(table.extract())) for table in page.find_tables()]
            found = [(table, text) for table, text in tables if text is not None]
            if found:
                pages[number] = _page_with_tables(page, found)
            page.close()
    return pages


def _page_with_tables(page: Any, tables: list[tuple[Any, str]]) -> str:
    """The page's lines outside its tables and the tables (a blank line around each), ordered by their top."""
    outside = page
    for table, _ in tables:
        outside = outside.outside_bbox(table.bbox)
    blocks = [(line["top"], line["text"]) for line in outside.extract_text_lines()]
    blocks += [(table.bbox[1], f"\n{text}\n") for table, text in tables]
    return "\n".join(text for _, text in sorted(blocks, key=lambda block: block[0])).strip("\n")


def outline_headings(reader: PdfReader) -> list[OutlineHeading]:
    """The outline's entries in outline order; an unreadable outline, or entry, is skipped."""
    try:
        outline = reader.outline
    except Exception as error:  # a damaged outline only costs the headings
        logger.warning("Could not read a PDF's outline, no headings from it: {error}", error=error)
        return []
    headings: list[OutlineHeading] = []
    pending: list[tuple[Any, int]] = [(entry, 1) for entry in reversed(outline)]
    while pending:  # depth first, in outline order; a list after an entry holds that entry's children
        entry, level = pending.pop()
        if isinstance(entry, list):
            pending += [(child, level + 1) for child in reversed(entry)]
            continue
        try:
            page = reader.get_destination_page_number(entry)
            height = float(reader.pages[page].mediabox.top) if page is not None and page >= 0 else None
        except Exception:  # an entry pointing nowhere readable gives no heading
            continue
        title = " ".join(str(entry.title or "").split())
        if title and height is not None:
            top = entry.get("/Top")  # absent (/Fit), null, or the height the entry scrolls to
            page_top = not isinstance(top, int | float) or float(top) >= height
            headings.append(OutlineHeading(level, title, page, page_top))
    return headings


def with_headings(pages: list[str], headings: list[OutlineHeading]) -> list[str]:
    """`pages` with each heading written as a Markdown heading where its title stands (see PDFToMarkdownDocument)."""
    pages = list(pages)
    cursors = [0] * len(pages)
    at_top: list[list[str]] = [[] for _ in pages]
    for heading in headings:
        if not 0 <= heading.page < len(pages):
            continue
        text, marker = pages[heading.page], "#" * min(heading.level, 6)
        found = _title(text, heading.title, cursors[heading.page]) or _title(text, heading.title, 0)
        if found is not None:
            line = f"{marker} {' '.join(found.group().split())}"
            pages[heading.page] = text[: found.start()] + line + text[found.end() :]
            cursors[heading.page] = found.start() + len(line)
        elif heading.page_top:
            at_top[heading.page].append(f"{marker} {heading.title}\n")
    return ["".join(top) + text for top, text in zip(at_top, pages, strict=True)]


def _title(text: str, title: str, start: int) -> re.Match[str] | None:
    """The title on line(s) of its own from `start` on: case aside, whitespace aside, numbering allowed before it."""
    words = r"\s+".join(re.escape(word) for word in title.split())
    return re.compile(rf"(?m)^[ \t]*{_NUMBERING}(?i:{words})[ \t]*$").search(text, start)
