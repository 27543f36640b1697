"""HTML -> Markdown text: headings as `#` lines, tables as Markdown tables, lists and code blocks kept.

Haystack's HTMLToDocument (trafilatura) was not enough: trafilatura keeps headings only when it recognises a content
container (`<article>`, `<main>`, `div.content`), so generated documentation (DocBook, Texinfo: headings straight
under `<body>`) lost every heading and its definition-list terms; and its Markdown output adds `**`, backticks and
backslash escapes, so a golden quote copied from the page no longer matches the text. Here text is kept as the page
shows it and only block structure is written as Markdown.
"""

from __future__ import annotations

import codecs
import re
from pathlib import Path
from typing import Any

from haystack import Document, component, default_from_dict, default_to_dict
from haystack.dataclasses import ByteStream
from lxml import html as lxml_html

from components.converters.markdown_text import markdown_table, no_stray_headings
from components.converters.sources import convert_sources

HEADINGS = {f"h{level}": level for level in range(1, 7)}
# fmt: off
# Elements that flow inside a line; every other element starts a block of its own.
INLINE = frozenset({
    "a", "abbr", "b", "bdi", "bdo", "big", "cite", "code", "data", "del", "dfn", "em", "font", "i", "img", "ins",
    "kbd", "label", "mark", "q", "s", "samp", "small", "span", "strike", "strong", "sub", "sup", "time", "tt", "u",
    "var", "wbr",
})
# Never content: code, styles, controls, and the page's navigation, sidebars and footer.
DROPPED = frozenset({
    "script", "style", "noscript", "template", "head", "nav", "aside", "footer", "button", "select", "textarea",
    "input", "iframe", "svg", "canvas", "object", "embed",
})
# fmt: on
DROPPED_ROLES = frozenset({"navigation", "search"})
# Sphinx's and MkDocs' permalink mark in every heading (`¶`); the generated table of contents of DocBook, MediaWiki
# and others, which only repeats the headings.
DROPPED_CLASSES = frozenset({"headerlink", "toc"})
_SPACES = re.compile(r"[ \t\n\r\f]+")
_BREAK = "\x00"  # a <br>: a line break once the spaces around it are collapsed
_DECLARED = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?([A-Za-z0-9_.:-]+)""", re.IGNORECASE)
_MAX_SPAN = 1000  # the largest colspan HTML allows
# Declared charsets browsers read as their superset (the WHATWG Encoding Standard), as pages in them often use it.
_AS_BROWSERS_READ = {"ascii": "cp1252", "iso8859-1": "cp1252", "gb2312": "gb18030", "gbk": "gb18030"}


@component
class HTMLToMarkdownDocument:
    """
    Convert HTML files to Documents whose text is Markdown: `#` headings, Markdown tables, `-`/`1.` lists, fenced
    code blocks, a blank line between blocks.

    Only the page's main content is read: its one `<main>` (or `role="main"`) or `<article>` when it has one, else
    `<body>`, without scripts, navigation, sidebars (`<aside>`) and footers. Inline markup (bold, links, code) is
    dropped, not written as Markdown, so the text reads as the page does and quotes copied from it locate. A table
    of fewer than two rows or columns, or one holding another table, is layout and becomes text; merged cells
    (rowspan, colspan) repeat their text in every cell they cover.
    """

    def to_dict(self) -> dict[str, Any]:
        """Serialize the component (it has no init parameters)."""
        return default_to_dict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> HTMLToMarkdownDocument:
        """Deserialize the component."""
        return default_from_dict(cls, data)

    @component.output_types(documents=list[Document])
    def run(
        self,
        sources: list[str | Path | ByteStream],
        meta: dict[str, Any] | list[dict[str, Any]] | None = None,
    ) -> dict[str, list[Document]]:
        """
        Convert each HTML source; one that cannot be parsed or has no text is logged and left out.

        :param sources: HTML file paths or ByteStreams.
        :param meta: Metadata for every Document (a dict) or per source (a list as long as `sources`).
        :returns: `documents`: one per converted source, its metadata the stream's merged with `meta`.
        """
        return {"documents": convert_sources(sources, meta, html_to_markdown, "HTML file")}


def html_to_markdown(data: bytes) -> str:
    """The Markdown text of an HTML page's main content (see HTMLToMarkdownDocument)."""
    text = decode_html(data)
    tree = lxml_html.document_fromstring(text.encode("utf-8"), parser=lxml_html.HTMLParser(encoding="utf-8"))
    return "\n\n".join(_blocks(_content_root(tree)))


def decode_html(data: bytes) -> str:
    """The page's text in the codec `html_codec` names; ValueError when it names none."""
    codec = html_codec(data)
    if codec is None:
        raise ValueError("not UTF-8, and it declares no charset that decodes it")
    return data.decode(codec)


def html_codec(data: bytes) -> str | None:
    """UTF-8 when the bytes are UTF-8 (many pages declare a charset they are not in), else the charset the page
    declares when it decodes them; None otherwise, as a guess can turn the page into mojibake that reads as text."""
    try:
        data.decode("utf-8")
        return "utf-8-sig"
    except UnicodeDecodeError:
        pass
    declared = _DECLARED.search(data[:4096])
    if declared is None:
        return None
    try:
        name = codecs.lookup(declared.group(1).decode("ascii")).name
    except LookupError:
        return None
    for codec in (_AS_BROWSERS_READ.get(name, name), name):
        try:
            data.decode(codec)
            return codec
        except UnicodeDecodeError:
            continue
    return None


def _content_root(tree: Any) -> Any:
    """The page's one main element (the outermost, when nested), else its one article, else its body."""
    for xpath in ("//main | //*[@role='main']", "//article"):
        found = tree.xpath(xpath)
        outermost = [
            element for element in found if not any(parent in found for parent in element.iterancestors())
        ]
        if len(outermost) == 1:
            return outermost[0]
    body = tree.find("body")
    return tree if body is None else body


def _tag(element: Any) -> str | None:
    """The element's tag; None for comments and processing instructions."""
    return element.tag.lower() if isinstance(element.tag, str) else None


def _dropped(element: Any, tag: str) -> bool:
    return (
        tag in DROPPED
        or element.get("hidden") is not None
        or element.get("aria-hidden") == "true"
        or element.get("role") in DROPPED_ROLES
        or not DROPPED_CLASSES.isdisjoint((element.get("class") or "").lower().split())
    )


def _blocks(element: Any) -> list[str]:
    """The Markdown blocks of an element's content, in document order."""
    blocks: list[str] = []
    inline = [element.text or ""]
    for child in element:
        tag = _tag(child)
        if tag is not None and not _dropped(child, tag):
            if tag == "br":
                inline.append(_BREAK)
            elif tag in INLINE:
                inline.append(_inline(child))
            else:
                _flush(inline, blocks)
                blocks.extend(_block(child, tag))
        inline.append(child.tail or "")
    _flush(inline, blocks)
    return blocks


def _flush(inline: list[str], blocks: list[str]) -> None:
    text = no_stray_headings(_collapse("".join(inline)))
    inline.clear()
    if text:
        blocks.append(text)


def _collapse(text: str) -> str:
    """HTML whitespace rules: runs of spaces and newlines are one space; a <br> is a line break."""
    lines = (_SPACES.sub(" ", part).strip() for part in text.split(_BREAK))
    return "\n".join(line for line in lines if line)


def _inline(element: Any) -> str:
    """The text of an element and its descendants, <br> as _BREAK; a nested block is set off by spaces."""
    parts = [element.text or ""]
    for child in element:
        tag = _tag(child)
        if tag == "br":
            parts.append(_BREAK)
        elif tag is not None and not _dropped(child, tag):
            parts.append(_inline(child) if tag in INLINE else f" {_inline(child)} ")
        parts.append(child.tail or "")
    return "".join(parts)


def _block(element: Any, tag: str) -> list[str]:
    if tag in HEADINGS:
        heading = " ".join(_inline(element).replace(_BREAK, " ").split())
        return [f"{'#' * HEADINGS[tag]} {heading}"] if heading else []
    if tag == "pre":
        return _code(element)
    if tag in ("ul", "ol"):
        return _list(element, ordered=tag == "ol")
    if tag == "table":
        return _table(element)
    return _blocks(element)


def _code(element: Any) -> list[str]:
    """A fenced code block, its text as written (a `#` line in it is then no heading for the markdown chunker)."""
    code = _inline(element).replace(_BREAK, "\n").strip("\n").rstrip()
    if not code.strip():
        return []
    fence = "`" * max([3, *(len(run) + 1 for run in re.findall(r"`+", code))])
    return [f"{fence}\n{code}\n{fence}"]


def _list(element: Any, ordered: bool) -> list[str]:
    """One block: an item a line (`- ` or `N. `), its further lines and nested lists indented under it."""
    start = element.get("start", "")
    number = int(start) if ordered and start.isdigit() else 1
    lines = []
    for child in element:
        tag = _tag(child)
        if tag is not None and not _dropped(child, tag):
            if tag == "li":
                marker = f"{number}. " if ordered else "- "
                number += 1
                body = "\n".join(_blocks(child))
            else:  # a list nested straight in a list, or stray content
                marker = "  "
                body = "\n".join(_block(child, tag) if tag not in INLINE else [_collapse(_inline(child))])
            if body:
                first, *rest = body.split("\n")
                lines += [marker + first, *(" " * len(marker) + line if line else line for line in rest)]
        tail = _collapse(child.tail or "")
        if tail:
            lines.append(tail)
    return ["\n".join(lines)] if lines else []


def _table(element: Any) -> list[str]:
    """A Markdown table after the caption, or, for a layout table, its cells' blocks."""
    table = None if element.xpath(".//table") else markdown_table(_grid(element))
    if table is None:
        return _blocks(element)
    captions = [no_stray_headings(_collapse(_inline(caption))) for caption in element.findall("caption")]
    return [*(caption for caption in captions if caption), table]


def _grid(element: Any) -> list[list[str]]:
    """The table's rows as cell texts, a merged cell's text repeated in every position it covers."""
    rows = element.xpath("./tr | ./thead/tr | ./tbody/tr | ./tfoot/tr")
    grid: dict[tuple[int, int], str] = {}
    for r, row in enumerate(rows):
        c = 0
        for cell in row.xpath("./th | ./td"):
            while (r, c) in grid:
                c += 1
            text = _collapse(_inline(cell))
            down, across = _span(cell, "rowspan", len(rows) - r), _span(cell, "colspan", _MAX_SPAN)
            grid.update({(r + dr, c + dc): text for dr in range(down) for dc in range(across)})
            c += across
    width = max((c for _, c in grid), default=-1) + 1
    return [[grid.get((r, c), "") for c in range(width)] for r in range(len(rows))]


def _span(cell: Any, attribute: str, limit: int) -> int:
    value = (cell.get(attribute) or "").strip()
    return min(int(value), limit) if value.isdigit() and int(value) > 0 else 1
