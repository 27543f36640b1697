"""The Markdown the HTML and PDF converters write: tables (as Word and Excel tables are), and no heading by accident."""

from __future__ import annotations

import re
from collections.abc import Sequence

# A line the markdown chunker (Haystack's MarkdownHeaderSplitter) reads as a heading.
_HEADING_LIKE = re.compile(r"(?m)^(?=#{1,6} )")


def no_stray_headings(text: str) -> str:
    """`text` with one space before each line that would read as a Markdown heading (`# comment` in a PDF, a
    paragraph opening with `# `): whitespace only, so quotes still locate, and only real headings make sections."""
    return _HEADING_LIKE.sub(" ", text)


def markdown_table(rows: Sequence[Sequence[str | None]]) -> str | None:
    """A GFM table whose header is the first row, each cell on one line with `|` escaped, rows padded to one width.

    Rows without text are left out. None when fewer than two rows or two columns remain: such a "table" is page
    layout (a framed note, a one-cell box), not data, and stays text.
    """
    cells = [[" ".join((cell or "").split()).replace("|", "\\|") for cell in row] for row in rows]
    cells = [row for row in cells if any(row)]
    width = max((len(row) for row in cells), default=0)
    if len(cells) < 2 or width < 2:
        return None
    lines = ["| " + " | ".join(row + [""] * (width - len(row))) + " |" for row in cells]
    return "\n".join([lines[0], "|" + " --- |" * width, *lines[1:]])
