"""Small real PDFs written with pypdf alone: lines of text, tables drawn with ruling lines, an outline (bookmarks).

No binary fixture is checked in: each test writes the PDF it reads.
"""

from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from pypdf import PdfWriter
from pypdf.generic import DecodedStreamObject, DictionaryObject, Fit, NameObject

WIDTH, HEIGHT = 612, 792
_LINE, _ROW, _CELL = 24, 20, 150


class Bookmark(NamedTuple):
    """An outline entry: nested under the previous entry of `level - 1`; `top` None points at the page itself."""

    title: str
    page: int
    level: int = 1
    top: float | None = None


Block = str | Sequence[Sequence[str]]  # a line of text, or a table's rows (drawn with ruling lines)


def write_pdf(path: Path, pages: Sequence[Sequence[Block]], outline: Sequence[Bookmark] = ()) -> Path:
    """A PDF whose pages hold `pages`' blocks from the top down, in Helvetica, with `outline` as its bookmarks."""
    writer = PdfWriter()
    for blocks in pages:
        page = writer.add_blank_page(WIDTH, HEIGHT)
        font = DictionaryObject(
            {
                NameObject("/Type"): NameObject("/Font"),
                NameObject("/Subtype"): NameObject("/Type1"),
                NameObject("/BaseFont"): NameObject("/Helvetica"),
            }
        )
        page[NameObject("/Resources")] = DictionaryObject(
            {NameObject("/Font"): DictionaryObject({NameObject("/F1"): font})}
        )
        stream = DecodedStreamObject()
        stream.set_data("\n".join(_operators(blocks)).encode("latin-1"))
        page.replace_contents(stream)
    parents: dict[int, object] = {}
    for mark in outline:
        fit = Fit.fit() if mark.top is None else Fit.xyz(left=72, top=mark.top, zoom=0)
        parents[mark.level] = writer.add_outline_item(
            title=mark.title, page_number=mark.page, parent=parents.get(mark.level - 1), fit=fit
        )
    writer.write(path)
    return path


def _operators(blocks: Sequence[Block]) -> list[str]:
    operators, y = [], HEIGHT - 72
    for block in blocks:
        if isinstance(block, str):
            operators.append(_text(72, y, block))
            y -= _LINE
            continue
        width = _CELL * len(block[0])
        for row in range(len(block) + 1):  # the horizontal rules, then the vertical ones
            operators.append(f"72 {y - row * _ROW} m {72 + width} {y - row * _ROW} l S")
        for column in range(len(block[0]) + 1):
            operators.append(f"{72 + column * _CELL} {y} m {72 + column * _CELL} {y - len(block) * _ROW} l S")
        for row, cells in enumerate(block):
            operators += [
                _text(76 + column * _CELL, y - (row + 1) * _ROW + 6, cell)
                for column, cell in enumerate(cells)
            ]
        y -= len(block) * _ROW + _LINE
    return operators


def _text(x: float, y: float, text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
    return f"BT /F1 11 Tf {x} {y} Td ({escaped}) Tj ET"
