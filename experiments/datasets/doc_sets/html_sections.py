"""HTML page -> sections: every heading of the page's main content with the text up to the next heading.

Written for the two generators the sets come from (Sphinx and DocBook XSL): their navigation, tables of contents
and permalink marks are never part of a section's text, and section numbering is removed from headings. Each
section also keeps its content as the page's own HTML (tables, lists and code as they are), for the sets whose
corpus is read through the product's converters instead of as plain text.
"""

from __future__ import annotations

import copy
import html as html_text
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from lxml import etree
from lxml import html as lxml_html

HEADING_TAGS = ("h1", "h2", "h3", "h4", "h5", "h6")
BLOCK_TAGS = frozenset(
    {
        "address", "article", "aside", "blockquote", "body", "br", "caption", "dd", "details",
        "div", "dl", "dt", "fieldset", "figcaption", "figure", "footer", "form", "header", "hr",
        "li", "main", "nav", "ol", "p", "pre", "section", "summary", "table", "tbody", "td",
        "tfoot", "th", "thead", "tr", "ul",
    }
)
CELL_TAGS = frozenset({"td", "th"})
DROP_TAGS = frozenset({"script", "style", "noscript", "template", "head", "nav", "button", "select", "iframe"})
# Navigation and generated lists of Sphinx and DocBook XSL pages: never part of a section's text.
DROP_CLASSES = frozenset(
    {
        "navheader", "navfooter", "toc", "list-of-tables", "list-of-figures", "list-of-examples",
        "sphinxsidebar", "related", "footer", "headerlink", "contents", "toctree-wrapper",
        "footnotes",
    }
)
# "7.1. ", "2.3.4 ", "A.1. ", "第 7 章 ", "附录 A. ", "Chapter 3. ", "Appendix B: " at the start of a heading.
_NUMBERING = re.compile(
    r"^\s*(?:第\s*[0-9一二三四五六七八九十百]+\s*[章节部分]+|附录\s*[A-Z](?:\.\d+)*\.?"
    r"|(?i:chapter|appendix|part|section)\s+[0-9A-Z]+(?:\.\d+)*[.:]?|[A-Z]?\d+(?:\.\d+)*\.?|[A-Z]\.(?:\d+\.?)*)"
    r"\s+"
)
_SPACES = re.compile(r"[ \t\r\f\v\u00a0\u3000]+")
_PRE_NEWLINE = "\x00"


@dataclass(frozen=True)
class Section:
    """One heading of a page and the text that follows it up to the next heading of any level."""

    page: str  # the page's path inside the package's documentation root, e.g. "faq/programming.html"
    index: int  # position of the heading in the page (0-based, all headings counted)
    level: int  # 1-6
    heading: str  # cleaned: numbering and permalink marks removed
    anchor: str | None
    body: str
    # The same content as the page's HTML elements (navigation and tables of contents left out), heading excluded.
    html: str = ""


def parse_sections(html: str | bytes, page: str) -> list[Section]:
    """Every heading of the page's main content with the text up to the next heading (its body, heading excluded).

    The main content is Sphinx's `div[role=main]` when there is one, else `<body>`; navigation, tables of
    contents, permalink marks, scripts and styles are left out. Text before the first heading is dropped.
    """
    if isinstance(html, str):
        html = html.encode("utf-8")  # lxml refuses str input with an XML encoding declaration
    if not html.strip():
        return []
    tree = lxml_html.fromstring(html, parser=lxml_html.HTMLParser(encoding=_declared_encoding(html)))
    mains = tree.xpath('//*[@role="main"]')
    root = mains[0] if mains else (tree.find(".//body") if tree.find(".//body") is not None else tree)
    walker = _Walker()
    walker.walk(root)
    walker.close()
    sections = []
    for index, (level, heading, anchor, fragments, markup) in enumerate(walker.sections):
        sections.append(
            Section(
                page=page,
                index=index,
                level=level,
                heading=clean_heading(heading),
                anchor=anchor,
                body=_assemble(fragments),
                html="".join(markup).strip(),
            )
        )
    return sections


def _declared_encoding(data: bytes) -> str:
    match = re.search(rb"""charset\s*=\s*["']?([A-Za-z0-9_\-]+)""", data[:4096])
    return match.group(1).decode("ascii") if match else "utf-8"


class _Walker:
    """Collects (level, heading text, anchor, text fragments, HTML fragments) per heading, in document order.

    An element with no heading inside is copied whole into the section's HTML (less what is never content); one
    holding a heading is walked into, so every element lands in the section of the heading before it.
    """

    def __init__(self) -> None:
        self.sections: list[tuple[int, str, str | None, list[str], list[str]]] = []
        self._fragments: list[str] | None = None  # None before the first heading
        self._markup: list[str] | None = None
        self._copying = False  # inside an element already copied whole

    def close(self) -> None:
        self._fragments = self._markup = None

    def _text(self, text: str | None, pre: bool) -> None:
        """Text between elements: into the section's text and, unless inside a copied element, its HTML."""
        self._emit(text, pre)
        if text and self._markup is not None and not self._copying:
            self._markup.append(html_text.escape(text, quote=False))

    def _emit(self, text: str | None, pre: bool = False) -> None:
        if not text or self._fragments is None:
            return
        self._fragments.append(
            text.replace("\n", _PRE_NEWLINE) if pre else _SPACES.sub(" ", text.replace("\n", " "))
        )

    def _mark(self, separator: str) -> None:
        """A block boundary ("\\n\\n") or a table cell separator, kept as is."""
        if self._fragments is not None:
            self._fragments.append(separator)

    def walk(self, element: Any, pre: bool = False) -> None:
        for child in element:
            self._node(child, pre)

    def _node(self, element: Any, pre: bool) -> None:
        if not isinstance(element.tag, str) or _dropped(element):  # comments, processing instructions, navigation
            self._text(element.tail, pre)
            return
        tag = element.tag.lower()
        if tag in HEADING_TAGS:
            self._fragments, self._markup = [], []
            self.sections.append(
                (int(tag[1]), _heading_text(element), _anchor(element), self._fragments, self._markup)
            )
            self._text(element.tail, pre)
            return
        copied = self._markup is not None and not self._copying and next(element.iter(*HEADING_TAGS), None) is None
        if copied:
            self._markup.append(_content_html(element))
            self._copying = True
        block = tag in BLOCK_TAGS
        inner_pre = pre or tag == "pre"
        if block:
            self._mark("\n\n" if tag not in CELL_TAGS else " | ")
        self._text(element.text, inner_pre)
        self.walk(element, inner_pre)
        if block and tag not in CELL_TAGS:
            self._mark("\n\n")
        self._copying = self._copying and not copied
        self._text(element.tail, pre)


def _dropped(element: Any) -> bool:
    """Never part of a section: scripts, styles, navigation, tables of contents, permalink marks."""
    classes = set((element.get("class") or "").split())
    return element.tag.lower() in DROP_TAGS or bool(classes & DROP_CLASSES)


def _content_html(element: Any) -> str:
    """The element as HTML without its tail, less the descendants `_dropped` leaves out."""
    kept = copy.deepcopy(element)
    for descendant in [d for d in kept.iterdescendants() if isinstance(d.tag, str) and _dropped(d)]:
        descendant.drop_tree()
    return lxml_html.tostring(kept, encoding="unicode", with_tail=False)


def _heading_text(element: Any) -> str:
    copy = lxml_html.fromstring(etree.tostring(element, encoding="unicode", with_tail=False))
    for mark in copy.xpath('.//*[contains(concat(" ", normalize-space(@class), " "), " headerlink ")]'):
        mark.drop_tree()
    return " ".join(copy.text_content().split())


def _anchor(heading: Any) -> str | None:
    """The id a link to this heading would use: its own, a child's (DocBook `<a id>`), or its section's."""
    if heading.get("id"):
        return heading.get("id")
    for child in heading.iter():
        if child is not heading and child.get("id"):
            return child.get("id")
    parent = heading.getparent()
    while parent is not None:
        if parent.get("id") and parent.tag in ("section", "div"):
            return parent.get("id")
        if parent.tag not in ("div", "header", "hgroup"):
            break
        parent = parent.getparent()
    return None


def _assemble(fragments: Sequence[str]) -> str:
    """Fragments -> text: paragraphs separated by one blank line, preformatted line breaks kept."""
    blocks = []
    for block in re.split(r"\s*\n\n\s*", "".join(fragments)):
        block = re.sub(r"^\|\s*", "", block.strip(" ")).strip(" |")  # a table row's leading cell separator
        block = block.replace(_PRE_NEWLINE, "\n").strip("\n").rstrip()
        if block.strip():
            blocks.append(block)
    return "\n\n".join(blocks)


def clean_heading(text: str) -> str:
    """Heading text without permalink marks (¶), section numbering and surrounding whitespace."""
    text = unicodedata.normalize("NFC", text).replace("¶", " ")
    text = " ".join(text.split())
    return _NUMBERING.sub("", text, count=1).strip()
