"""Markdown -> a Word file, for the sets whose corpus is `.docx` (corpus_format: docx): `#` headings become Word
headings, Markdown tables Word tables, list items list paragraphs, the rest paragraphs, so Haystack's DOCXToDocument
reads back the same text and tables. The Markdown is what the product's HTML converter writes of a section's page.

Built with python-docx, which stamps the time into the core properties and the ZIP entries: both are fixed here,
so a set builds the same bytes every time.
"""

from __future__ import annotations

import io
import re
import zipfile
from datetime import UTC, datetime
from typing import Any

import docx

# The core properties' dates and every ZIP entry's time: ZIP's epoch, the earliest time it can store.
FIXED_TIME = (1980, 1, 1, 0, 0, 0)
_FENCE = re.compile(r"^`{3,}$")
_HEADING = re.compile(r"^(#{1,6}) (.+)$")
_LIST_ITEM = re.compile(r"^ *(?:- |\d+\. )(.*)$")  # nested items are indented
_TABLE_RULE = re.compile(r"^\|(?: --- \|)+$")
_CELL_BORDER = re.compile(r"(?<!\\)\|")


def markdown_docx(markdown: str, title: str) -> bytes:
    """The bytes of a .docx holding `markdown` block by block, `title` in its core properties."""
    document = docx.Document()
    properties = document.core_properties
    properties.title = title
    properties.author = properties.last_modified_by = "ragtune doc-sets"
    properties.created = properties.modified = datetime(*FIXED_TIME, tzinfo=UTC)
    properties.revision = 1
    for block in markdown_blocks(markdown):
        _add_block(document, block)
    saved = io.BytesIO()
    document.save(saved)
    return _fixed_times(saved.getvalue())


def markdown_blocks(markdown: str) -> list[str]:
    """The blocks the converter separates by a blank line; a fenced code block stays one block with its blank lines."""
    blocks: list[str] = []
    lines: list[str] = []
    fence: str | None = None
    for line in markdown.split("\n"):
        if fence is None and not line.strip():
            if lines:
                blocks.append("\n".join(lines))
            lines = []
            continue
        lines.append(line)
        if fence is None and len(lines) == 1 and _FENCE.match(line):
            fence = line
        elif fence is not None and line == fence:
            fence = None
    if lines:
        blocks.append("\n".join(lines))
    return blocks


def _add_block(document: Any, block: str) -> None:
    lines = block.split("\n")
    heading = _HEADING.match(block)
    if heading and len(lines) == 1:
        document.add_heading(heading.group(2), level=len(heading.group(1)))
    elif len(lines) > 2 and _FENCE.match(lines[0]) and lines[-1] == lines[0]:
        document.add_paragraph("\n".join(lines[1:-1]))  # one paragraph, its lines as line breaks
    elif len(lines) >= 2 and _TABLE_RULE.match(lines[1]) and all(line.startswith("|") for line in lines):
        _add_table(document, [lines[0], *lines[2:]])
    elif _LIST_ITEM.match(lines[0]) and not lines[0].startswith(" "):
        for line in lines:
            item = _LIST_ITEM.match(line)
            style = (
                ("List Number" if line.lstrip()[0].isdigit() else "List Bullet") if item else "List Continue"
            )
            document.add_paragraph(item.group(1) if item else line.strip(), style=style)
    else:
        document.add_paragraph(block)


def _add_table(document: Any, rows: list[str]) -> None:
    """A Word table of the Markdown rows (the first is the header), `\\|` back to `|` in each cell."""
    cells = [[cell.strip().replace("\\|", "|") for cell in _CELL_BORDER.split(row)[1:-1]] for row in rows]
    table = document.add_table(rows=len(cells), cols=max(len(row) for row in cells))
    for row, texts in zip(table.rows, cells, strict=True):
        for cell, text in zip(row.cells, texts, strict=False):
            cell.text = text


def _fixed_times(package: bytes) -> bytes:
    """The same ZIP package with every entry dated FIXED_TIME and marked as made on Unix."""
    rewritten = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(package)) as source, zipfile.ZipFile(rewritten, "w") as target:
        for entry in source.infolist():
            info = zipfile.ZipInfo(entry.filename, date_time=FIXED_TIME)
            info.create_system, info.external_attr = 3, 0o644 << 16
            target.writestr(info, source.read(entry), compress_type=zipfile.ZIP_DEFLATED)
    return rewritten.getvalue()
