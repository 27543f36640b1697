"""Offline evaluation sets built from Debian documentation packages: sections are documents, and the queries are
either the headings or questions written by hand.

A FAQ's headings are questions and a manual's headings name what their section explains, so a package of HTML
documentation becomes a retrieval set without writing a single question by hand. Headings are not how users ask,
so the validation sets (`questions=` in their spec) take natural questions written by hand instead, kept in
`data/validation/<set>.jsonl` with evidence quotes that the build locates in the corpus it writes:

    ragtune doc-sets list
    ragtune doc-sets build python_faq-en        # -> .cache/ragtune/doc_sets/python_faq-en
    python run.py dataset=local dataset.name=python_faq-en \\
        dataset.corpus_dir=.cache/ragtune/doc_sets/python_faq-en/corpus \\
        dataset.golden=.cache/ragtune/doc_sets/python_faq-en/golden.jsonl

`build` runs `apt-get download <package>` (no root needed, but the apt lists must exist: `apt-get update`), unpacks
it with `dpkg-deb -x`, splits every selected HTML page at each heading (h1-h6) and writes:

- `corpus/<page>/<NNN>-<anchor>.txt`: one file per section, the text between its heading and the next heading
  of any level, without the heading itself. Its path relative to `corpus/` is its doc id (as `dataset=local`
  assigns them).
- `golden.jsonl`: one item per kept heading: `question` = the heading (numbering removed), `relevant_doc_ids` =
  its own section, `category` = the page it came from; or, for a set with hand-written questions, those questions,
  each evidence quote located in the corpus (the build fails naming every quote it cannot find).
- `SOURCE.json` and `README.md`: package, version, .deb SHA-256, filters, counts, how queries were sampled.

The cache root is `$RAGTUNE_CACHE` when set, as for `paths.cache`. The set is written into a temporary folder
beside the output folder and swapped in only once complete, so a failed rebuild keeps the previous set. An output
folder that holds anything but a set ragtune wrote (its marker file) is refused unless `--force`.

Filters: a section whose body has fewer than `min_body_words` words is dropped; a section with a generic heading
("Introduction", "Contents", ...) or a heading of fewer than `min_heading_words` words stays in the corpus as a
distractor without a query. Duplicate bodies keep their first section only; a heading that occurs more than
once (after normalisation) is ambiguous, so none of its sections gets a query. Two Han characters count as one
word. The build is deterministic: pages in sorted order, sections in page order, and when a set has more than
`max_queries` candidate queries the kept ones are those with the smallest SHA-256 of `<set name>:<doc id>`.
"""

from __future__ import annotations

import argparse
import fnmatch
import hashlib
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from lxml import etree
from lxml import html as lxml_html

from components.common.paths import cache_root
from components.common.words import prose_words
from experiments.datasets.base import seeded_rank
from experiments.runs.output_dir import check_output_folder
from pipelines.errors import UserError

BUILDER_VERSION = 2
QUESTIONS_DIR = Path(__file__).resolve().parents[2] / "data" / "validation"
# Written first into every set's folder: a folder bearing it may be replaced by a rebuild.
MARKER = ".ragtune-doc-set"

HEADING_TAGS = ("h1", "h2", "h3", "h4", "h5", "h6")
BLOCK_TAGS = frozenset(
    [
        "address",
        "article",
        "aside",
        "blockquote",
        "body",
        "br",
        "caption",
        "dd",
        "details",
        "div",
        "dl",
        "dt",
        "fieldset",
        "figcaption",
        "figure",
        "footer",
        "form",
        "header",
        "hr",
        "li",
        "main",
        "nav",
        "ol",
        "p",
        "pre",
        "section",
        "summary",
        "table",
        "tbody",
        "td",
        "tfoot",
        "th",
        "thead",
        "tr",
        "ul",
    ]
)
CELL_TAGS = frozenset({"td", "th"})
DROP_TAGS = frozenset(
    {"script", "style", "noscript", "template", "head", "nav", "button", "select", "iframe"}
)
# Navigation and generated lists of Sphinx and DocBook XSL pages: never part of a section's text.
DROP_CLASSES = frozenset(
    {
        "navheader",
        "navfooter",
        "toc",
        "list-of-tables",
        "list-of-figures",
        "list-of-examples",
        "sphinxsidebar",
        "related",
        "footer",
        "headerlink",
        "contents",
        "toctree-wrapper",
        "footnotes",
    }
)
# Headings that name a kind of section rather than what it says (compared lower-cased, numbering removed).
GENERIC_HEADINGS = frozenset(
    {
        "introduction",
        "contents",
        "table of contents",
        "notes",
        "note",
        "overview",
        "summary",
        "references",
        "see also",
        "acknowledgements",
        "acknowledgments",
        "example",
        "examples",
        "abstract",
        "preface",
        "index",
        "glossary",
        "footnotes",
        "conclusion",
        "further reading",
        "for more information",
        "more information",
        "further information",
        "next steps",
        "what's next",
        "related",
        "resources",
        "history",
        "license",
        "author",
        "authors",
        "目录",
        "简介",
        "介绍",
        "引言",
        "概述",
        "概要",
        "前言",
        "注意",
        "注释",
        "备注",
        "参考",
        "参考文献",
        "参见",
        "示例",
        "例子",
        "总结",
        "摘要",
        "致谢",
        "术语表",
        "索引",
        "更多信息",
        "历史",
        "作者",
        "许可",
        "版权",
    }
)
# "7.1. ", "2.3.4 ", "A.1. ", "第 7 章 ", "附录 A. ", "Chapter 3. ", "Appendix B: " at the start of a heading.
_NUMBERING = re.compile(
    r"^\s*(?:第\s*[0-9一二三四五六七八九十百]+\s*[章节部分]+|附录\s*[A-Z](?:\.\d+)*\.?"
    r"|(?i:chapter|appendix|part|section)\s+[0-9A-Z]+(?:\.\d+)*[.:]?|[A-Z]?\d+(?:\.\d+)*\.?|[A-Z]\.(?:\d+\.?)*)"
    r"\s+"
)
_SLUG = re.compile(r"[^a-z0-9]+")
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


@dataclass(frozen=True)
class DocSetSpec:
    """Where a set's pages come from: a Debian package, a folder inside it, and glob patterns (relative to it)."""

    name: str
    package: str
    root: str
    include: tuple[str, ...]
    exclude: tuple[str, ...] = ()
    language: str = "en"
    description: str = ""
    max_queries: int = 300
    max_documents: int = 1500
    # Hand-written questions (data/validation/<file>), used instead of the headings.
    questions: str | None = None


SPECS: dict[str, DocSetSpec] = {
    spec.name: spec
    for spec in (
        DocSetSpec(
            name="python_faq-en",
            package="python3.11-doc",
            root="usr/share/doc/python3.11/html",
            include=("faq/*.html",),
            exclude=("faq/index.html",),
            language="en",
            description="Python 3.11 FAQ pages (programming, library, design, general, extending, ...): "
            "every question heading is a query.",
        ),
        DocSetSpec(
            name="python_howto-en",
            package="python3.11-doc",
            root="usr/share/doc/python3.11/html",
            include=("howto/*.html",),
            exclude=("howto/index.html",),
            language="en",
            description="Python 3.11 HOWTOs (logging, regex, sorting, descriptors, ...): manual-style section "
            "headings as queries.",
        ),
        DocSetSpec(
            name="debian_faq-zh",
            package="debian-faq-zh-cn",
            root="usr/share/doc/debian/FAQ/zh-cn",
            include=("*.zh-cn.html",),
            exclude=("index.zh-cn.html",),
            language="zh",
            description="Debian GNU/Linux FAQ, Simplified Chinese translation: question headings as queries.",
        ),
        DocSetSpec(
            name="debian_reference-zh",
            package="debian-reference-zh-cn",
            root="usr/share/debian-reference",
            include=("ch*.zh-cn.html", "ap*.zh-cn.html"),
            language="zh",
            description="Debian Reference (system administration guide), Simplified Chinese translation: "
            "section headings as queries.",
        ),
        DocSetSpec(
            name="libreoffice_calc-zh",
            package="libreoffice-help-zh-cn",
            root="usr/share/libreoffice/help/zh-CN/text/scalc",
            include=("guide/*.html",),
            language="zh",
            description="LibreOffice Calc how-to guides, Simplified Chinese help: questions written by hand as "
            "Chinese users ask them, English names of functions, formats and dialogs included.",
            questions="libreoffice_calc-zh.jsonl",
        ),
        DocSetSpec(
            name="maint_guide-zh",
            package="maint-guide-zh-cn",
            root="usr/share/doc/maint-guide-zh-cn/html",
            include=("*.zh-cn.html",),
            exclude=("index.zh-cn.html",),
            language="zh",
            description="Debian New Maintainers' Guide (packaging with dh_make, debhelper, quilt, lintian), "
            "Simplified Chinese: questions written by hand, mixing in the English tool names.",
            questions="maint_guide-zh.jsonl",
        ),
        DocSetSpec(
            name="debian_edu-zh",
            package="debian-edu-doc-zh-cn",
            root="usr/share/doc/debian-edu-doc-zh-cn",
            include=("debian-edu-bookworm-manual.html",),
            language="zh",
            description="Debian Edu (Skolelinux) Bookworm manual, Simplified Chinese: questions written by hand "
            "about LTSP, LDAP, Kerberos, GOsa, DHCP and the rest, as a school's admin would ask.",
            questions="debian_edu-zh.jsonl",
        ),
        DocSetSpec(
            name="libreoffice_writer-zh",
            package="libreoffice-help-zh-cn",
            root="usr/share/libreoffice/help/zh-CN/text/swriter",
            include=("guide/*.html",),
            language="zh",
            description="LibreOffice Writer how-to guides, Simplified Chinese help: questions written by hand as "
            "Chinese users ask them, English names of fields, styles and formats included.",
            questions="libreoffice_writer-zh.jsonl",
        ),
        DocSetSpec(
            name="developers_reference-en",
            package="developers-reference",
            root="usr/share/developers-reference",
            include=("*.html",),
            exclude=("index.html", "search.html", "genindex.html", "developers-reference.html"),
            language="en",
            description="Debian Developer's Reference: questions written by hand, as a maintainer would ask them.",
            questions="developers_reference-en.jsonl",
        ),
        DocSetSpec(
            name="git_manual-en",
            package="git-doc",
            root="usr/share/doc/git-doc",
            include=("user-manual.html", "gittutorial.html", "gittutorial-2.html", "gitcore-tutorial.html"),
            language="en",
            description="Git's user manual and tutorials: questions written by hand, as a developer would ask.",
            questions="git_manual-en.jsonl",
        ),
    )
}


class DocSetError(UserError):
    """A set cannot be built: the message says which step failed and what to do."""


# How the hand-written questions of data/validation/ were written, recorded in each such set's SOURCE.json.
HOW_WRITTEN = (
    "Written item by item by an LLM agent (Claude) reading this build's corpus files, before any retrieval had run "
    "on them (no index, search or model was used to choose or check them): natural questions in the corpus's "
    "language, the Chinese ones mixing in English tool, format and function names as Chinese engineers write "
    "them, sharing at most 8 consecutive Han characters (5 English words) with their evidence; each evidence "
    "quote copied verbatim from one section (two for multi-hop items); at most 3 questions per section; "
    "unanswerable questions ask for a fact the corpus lacks about a topic it covers (checked with grep)."
)
MIN_ANSWERABLE, MIN_UNANSWERABLE = 40, 5


# --- HTML -> sections -----------------------------------------------------------------------------------------


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
    for index, (level, heading, anchor, fragments) in enumerate(walker.sections):
        sections.append(
            Section(
                page=page,
                index=index,
                level=level,
                heading=clean_heading(heading),
                anchor=anchor,
                body=_assemble(fragments),
            )
        )
    return sections


def _declared_encoding(data: bytes) -> str:
    match = re.search(rb"""charset\s*=\s*["']?([A-Za-z0-9_\-]+)""", data[:4096])
    return match.group(1).decode("ascii") if match else "utf-8"


class _Walker:
    """Collects (level, heading text, anchor, text fragments) per heading, in document order."""

    def __init__(self) -> None:
        self.sections: list[tuple[int, str, str | None, list[str]]] = []
        self._fragments: list[str] | None = None  # None before the first heading

    def close(self) -> None:
        self._fragments = None

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
        tag = element.tag if isinstance(element.tag, str) else None
        if tag is None:  # comments, processing instructions
            self._emit(element.tail, pre)
            return
        tag = tag.lower()
        classes = set((element.get("class") or "").split())
        if tag in DROP_TAGS or classes & DROP_CLASSES:
            self._emit(element.tail, pre)
            return
        if tag in HEADING_TAGS:
            self._fragments = []
            self.sections.append((int(tag[1]), _heading_text(element), _anchor(element), self._fragments))
            self._emit(element.tail, pre)
            return
        block = tag in BLOCK_TAGS
        inner_pre = pre or tag == "pre"
        if block:
            self._mark("\n\n" if tag not in CELL_TAGS else " | ")
        self._emit(element.text, inner_pre)
        self.walk(element, inner_pre)
        if block and tag not in CELL_TAGS:
            self._mark("\n\n")
        self._emit(element.tail, pre)


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


# --- filtering ------------------------------------------------------------------------------------------------


def normalise(text: str) -> str:
    """Comparison form for de-duplication: NFKC, lower case, whitespace collapsed, end punctuation removed."""
    return " ".join(unicodedata.normalize("NFKC", text).lower().split()).rstrip("?.!:;。？！：；")


def is_generic_heading(heading: str) -> bool:
    stripped = heading.strip().rstrip(":：").strip().lower()
    return stripped in GENERIC_HEADINGS


@dataclass
class Selection:
    """Sections kept as documents, the ones that also give a query, and why the others were left out."""

    documents: list[Section] = field(default_factory=list)
    queries: list[Section] = field(default_factory=list)
    dropped: Counter = field(default_factory=Counter)  # reason -> sections dropped from the corpus
    no_query: Counter = field(default_factory=Counter)  # reason -> documents kept without a query


def select_sections(
    sections: Iterable[Section], min_heading_words: int = 3, min_body_words: int = 30
) -> Selection:
    """Drop short bodies and duplicate bodies; keep generic, short or repeated headings as documents without a query."""
    selection = Selection()
    seen_bodies: set[str] = set()
    for section in sections:
        if prose_words(section.body) < min_body_words:
            selection.dropped[f"body < {min_body_words} words"] += 1
            continue
        key = normalise(section.body)
        if key in seen_bodies:
            selection.dropped["duplicate body"] += 1
            continue
        seen_bodies.add(key)
        selection.documents.append(section)
    heading_counts = Counter(normalise(section.heading) for section in selection.documents)
    for section in selection.documents:
        if not section.heading or is_generic_heading(section.heading):
            selection.no_query["generic heading"] += 1
        elif prose_words(section.heading) < min_heading_words:
            selection.no_query[f"heading < {min_heading_words} words"] += 1
        elif heading_counts[normalise(section.heading)] > 1:
            selection.no_query["heading not unique"] += 1
        else:
            selection.queries.append(section)
    return selection


def doc_id(section: Section) -> str:
    """`<page without suffix>/<NNN>-<anchor slug>.txt`: unique per heading, readable, the same on every build."""
    page = re.sub(r"\.html?$", "", section.page)
    page = re.sub(r"\.zh-cn$", "", page)
    slug = _SLUG.sub("-", (section.anchor or "").lower()).strip("-")[:60].strip("-") or "section"
    return f"{page}/{section.index:03d}-{slug}.txt"


def sample_queries(name: str, sections: Sequence[Section], limit: int | None) -> list[Section]:
    """At most `limit` sections, those with the smallest SHA-256 of `<name>:<doc id>`, back in page order."""
    if limit is None or len(sections) <= limit:
        return list(sections)
    ranked = sorted(sections, key=lambda s: seeded_rank(name, doc_id(s)))
    kept = {doc_id(s) for s in ranked[:limit]}
    return [s for s in sections if doc_id(s) in kept]


def golden_items(name: str, sections: Sequence[Section]) -> list[dict[str, Any]]:
    """Golden JSONL records: the heading as question, its own section as the relevant document."""
    return [
        {
            "id": f"{name}-{number:04d}",
            "question": section.heading,
            "relevant_doc_ids": [doc_id(section)],
            "category": re.sub(r"(\.zh-cn)?\.html?$", "", section.page),
            "meta": {"page": section.page, "anchor": section.anchor, "heading_level": section.level},
        }
        for number, section in enumerate(sections, start=1)
    ]


# --- building -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Package:
    name: str
    version: str
    deb: Path
    sha256: str


def default_root() -> Path:
    """Where `build` puts a set unless told: `<cache root>/doc_sets`, so $RAGTUNE_CACHE moves it like the rest."""
    return cache_root() / "doc_sets"


def default_deb_dir() -> Path:
    """Where downloaded packages are kept: `<cache root>/downloads/debs`."""
    return cache_root() / "downloads" / "debs"


def download_package(package: str, deb_dir: Path) -> Package:
    """`apt-get download <package>` into `deb_dir` (reused when the candidate version is already there)."""
    for tool in ("apt-get", "apt-cache", "dpkg-deb"):
        if shutil.which(tool) is None:
            raise DocSetError(f"{tool} not found: building doc sets needs a Debian/Ubuntu system")
    policy = subprocess.run(
        ["apt-cache", "policy", package], capture_output=True, text=True, check=False
    ).stdout
    candidate = re.search(r"Candidate:\s*(\S+)", policy)
    if not candidate or candidate.group(1) == "(none)":
        raise DocSetError(
            f"apt knows no candidate version of {package!r}: run `apt-get update` (as root) so the package "
            "lists exist, or pass --deb FILE"
        )
    deb_dir.mkdir(parents=True, exist_ok=True)
    version = candidate.group(1)
    # apt writes an epoch into the file name as `%3a` (`4%3a7.4.7-1`); older apt dropped it.
    names = {f"{package}_{version.replace(':', '%3a')}_*.deb", f"{package}_{version.split(':', 1)[-1]}_*.deb"}
    existing = sorted(path for name in names for path in deb_dir.glob(name))
    if not existing:
        result = subprocess.run(
            ["apt-get", "download", package], cwd=deb_dir, capture_output=True, text=True, check=False
        )
        existing = sorted(path for name in names for path in deb_dir.glob(name))
        if result.returncode != 0 or not existing:
            raise DocSetError(f"apt-get download {package} failed: {_last_line(result.stderr)}")
    return package_info(existing[-1])


def package_info(deb: Path) -> Package:
    """Name, version and SHA-256 of `deb`; DocSetError when it is no Debian package."""
    fields = {}
    for key in ("Package", "Version"):
        result = subprocess.run(["dpkg-deb", "-f", str(deb), key], capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise DocSetError(f"--deb {deb}: not a Debian package ({_last_line(result.stderr)})")
        fields[key] = result.stdout.strip()
    digest = hashlib.sha256(deb.read_bytes()).hexdigest()
    return Package(fields["Package"], fields["Version"], deb, digest)


def _last_line(text: str) -> str:
    """A tool's error output as one line: its last non-empty line, which says what failed."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "no error output"


def select_pages(root: Path, include: Sequence[str], exclude: Sequence[str]) -> list[Path]:
    """Files under `root` matching an include pattern and no exclude pattern (relative POSIX paths), sorted."""
    pages = []
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root).as_posix()
        if not path.is_file() or any(fnmatch.fnmatchcase(relative, p) for p in exclude):
            continue
        if any(fnmatch.fnmatchcase(relative, p) for p in include):
            pages.append(path)
    return pages


def build(
    spec: DocSetSpec,
    out_dir: Path,
    deb: Path | None = None,
    deb_dir: Path | None = None,
    max_queries: int | None = None,
    min_heading_words: int = 3,
    min_body_words: int = 30,
    force: bool = False,
) -> dict[str, Any]:
    """Download (or take `deb`), unpack, parse and write the set into `out_dir`; returns SOURCE.json's content.

    `out_dir` is checked first (before the download) and replaced only by a complete set; a folder that is not a
    set ragtune wrote is refused unless `force`. `deb_dir` None: `<cache root>/downloads/debs`.
    """
    check_output_folder(out_dir, force, MARKER)
    package = package_info(deb) if deb else download_package(spec.package, deb_dir or default_deb_dir())
    if package.name != spec.package:
        raise DocSetError(
            f"{package.deb}: is package {package.name!r}, set {spec.name} needs {spec.package!r}"
        )
    max_queries = spec.max_queries if max_queries is None else max_queries
    with tempfile.TemporaryDirectory(prefix="ragtune-docset-") as tmp:
        subprocess.run(["dpkg-deb", "-x", str(package.deb), tmp], check=True)
        root = Path(tmp) / spec.root
        if not root.is_dir():
            raise DocSetError(f"{package.deb}: has no folder {spec.root}")
        pages = select_pages(root, spec.include, spec.exclude)
        if not pages:
            raise DocSetError(f"{package.deb}: no file under {spec.root} matches {list(spec.include)}")
        sections = [
            section
            for page in pages
            for section in parse_sections(page.read_bytes(), page.relative_to(root).as_posix())
        ]
    selection = select_sections(sections, min_heading_words, min_body_words)
    if len(selection.documents) > spec.max_documents:
        raise DocSetError(
            f"{spec.name}: {len(selection.documents)} sections exceed max_documents={spec.max_documents}; "
            "narrow the include patterns"
        )
    ids = [doc_id(section) for section in selection.documents]
    if len(set(ids)) != len(ids):
        raise DocSetError(f"{spec.name}: two sections map to the same doc id")
    if spec.questions:
        items = written_items(spec, {i: section.body + "\n" for i, section in zip(ids, selection.documents, strict=True)})
    else:
        items = golden_items(spec.name, sample_queries(spec.name, selection.queries, max_queries))

    corpus = out_dir / "corpus"
    source = {
        "name": spec.name,
        "builder": f"experiments.datasets.doc_sets v{BUILDER_VERSION}",
        "package": package.name,
        "version": package.version,
        "deb": package.deb.name,
        "deb_sha256": package.sha256,
        "spec": asdict(spec),
        "filters": {"min_heading_words": min_heading_words, "min_body_words": min_body_words},
        "pages": len(pages),
        "sections_parsed": len(sections),
        "documents": len(selection.documents),
        "dropped": dict(sorted(selection.dropped.items())),
        "documents_without_query": dict(sorted(selection.no_query.items())),
        "queries": len(items),
        **(_written_source(spec, items) if spec.questions else {
            "candidate_queries": len(selection.queries),
            "query_sampling": (
                f"all {len(items)} candidate queries"
                if len(items) == len(selection.queries)
                else f"{len(items)} of {len(selection.queries)}: smallest sha256('{spec.name}:<doc id>')"
            ),
        }),
        "load": (
            f"python run.py dataset=local dataset.name={spec.name} dataset.language={spec.language} "
            f"dataset.corpus_dir={corpus} dataset.golden={out_dir / 'golden.jsonl'}"
        ),
    }
    staging = out_dir.with_name(f".{out_dir.name}.building-{secrets.token_hex(4)}")
    staging.mkdir()  # not mkdtemp: the set gets the usual permissions, not 0700
    try:
        (staging / MARKER).touch()
        for section, identifier in zip(selection.documents, ids, strict=True):
            path = staging / "corpus" / identifier
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(section.body + "\n", encoding="utf-8")
        with (staging / "golden.jsonl").open("w", encoding="utf-8") as handle:
            for item in items:
                handle.write(json.dumps(item, ensure_ascii=False) + "\n")
        (staging / "SOURCE.json").write_text(json.dumps(source, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        (staging / "README.md").write_text(_readme(spec, source), encoding="utf-8")
        _swap_in(staging, out_dir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)  # gone already when swapped in
    return source


def _swap_in(staging: Path, out_dir: Path) -> None:
    """Renames `staging` to `out_dir`; a previous `out_dir` is moved aside first and deleted once the new one is in
    place (no rename replaces a non-empty folder in one step)."""
    previous = staging.with_name(f"{staging.name}-previous")
    had_previous = out_dir.exists()
    if had_previous:
        os.rename(out_dir, previous)
    try:
        os.rename(staging, out_dir)
    except BaseException:
        if had_previous:
            os.rename(previous, out_dir)
        raise
    if had_previous:
        shutil.rmtree(previous)


def written_items(spec: DocSetSpec, corpus: dict[str, str]) -> list[dict[str, Any]]:
    """The hand-written questions of `spec`, each evidence quote located in `corpus` (doc id -> text as written);
    one DocSetError naming every quote it cannot find, or too few items of a kind."""
    from haystack import Document

    from experiments.datasets.golden import GoldenError, load_golden

    path = QUESTIONS_DIR / str(spec.questions)
    try:
        located = load_golden(path, [Document(id=i, content=text) for i, text in corpus.items()])
    except (GoldenError, OSError) as e:
        raise DocSetError(f"{spec.name}: {e}") from None
    answerable = sum(1 for item in located if item.answerable)
    if answerable < MIN_ANSWERABLE or len(located) - answerable < MIN_UNANSWERABLE:
        raise DocSetError(f"{path}: {answerable} answerable and {len(located) - answerable} unanswerable questions; "
                          f"a validation set needs at least {MIN_ANSWERABLE} and {MIN_UNANSWERABLE}")
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _written_source(spec: DocSetSpec, items: Sequence[dict[str, Any]]) -> dict[str, Any]:
    path = QUESTIONS_DIR / str(spec.questions)
    return {
        "questions": f"data/validation/{spec.questions}",
        "questions_sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        "answerable": sum(1 for item in items if item.get("answerable", True)),
        "unanswerable": sum(1 for item in items if item.get("answerable") is False),
        "categories": dict(sorted(Counter(str(item.get("category")) for item in items).items())),
        "how_written": HOW_WRITTEN,
    }


def _readme(spec: DocSetSpec, source: dict[str, Any]) -> str:
    return (
        f"# {spec.name}\n\n{spec.description}\n\n"
        f"Built by `ragtune doc-sets build {spec.name}` from the Debian package "
        f"`{source['package']}` {source['version']} (`{source['deb']}`, sha256 {source['deb_sha256']}), "
        f"pages `{spec.root}/{{{','.join(spec.include)}}}`.\n\n"
        f"- documents (`corpus/`, one section body each, heading removed): {source['documents']}\n"
        + (f"- queries (`golden.jsonl`, written by hand): {source['answerable']} answerable, "
           f"{source['unanswerable']} unanswerable; {source['how_written']}\n" if spec.questions else
           f"- queries (`golden.jsonl`, the section heading): {source['queries']} ({source['query_sampling']})\n")
        + f"- dropped sections: {source['dropped']}\n"
        f"- documents without a query: {source['documents_without_query']}\n\n"
        f"Run: `{source['load']}`\n"
    )


def _deb_file(text: str) -> Path:
    path = Path(text)
    if not path.exists():
        raise argparse.ArgumentTypeError(f"no such file: {text}")
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"{text} is not a file (a .deb package)")
    return path


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return int(text)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="ragtune doc-sets", description=__doc__.split("\n")[0]
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("list", help="the sets this module can build")
    build_cmd = commands.add_parser("build", help="download a package and build one set")
    build_cmd.add_argument("name", nargs="+", choices=sorted(SPECS), help="set name(s)")
    build_cmd.add_argument(
        "--out", type=Path, help=f"output folder (one set only; default {default_root()}/NAME)"
    )
    build_cmd.add_argument(
        "--deb", type=_deb_file, help="use this .deb instead of apt-get download (one set only)"
    )
    build_cmd.add_argument(
        "--deb-dir", type=Path, default=default_deb_dir(), help="where downloaded .debs are kept"
    )
    build_cmd.add_argument("--max-queries", type=_positive, help="cap on queries (default: the set's own)")
    build_cmd.add_argument(
        "--force", action="store_true", help="replace an output folder that is not a set ragtune wrote"
    )
    build_cmd.add_argument("--min-heading-words", type=int, default=3)
    build_cmd.add_argument("--min-body-words", type=int, default=30)
    args = parser.parse_args(argv)

    if args.command == "list":
        for spec in SPECS.values():
            print(f"{spec.name:22} {spec.package:24} {spec.language}  {spec.description}")
        return 0
    if len(args.name) > 1 and (args.out or args.deb):
        parser.error("--out and --deb take one set name")
    out_dirs = {name: args.out or default_root() / name for name in args.name}
    for out_dir in out_dirs.values():  # every set's folder before the first download
        check_output_folder(out_dir, args.force, MARKER)
    for name, out_dir in out_dirs.items():
        source = build(
            SPECS[name],
            out_dir,
            deb=args.deb,
            deb_dir=args.deb_dir,
            max_queries=args.max_queries,
            min_heading_words=args.min_heading_words,
            min_body_words=args.min_body_words,
            force=args.force,
        )
        queries = (f"{source['answerable']} answerable and {source['unanswerable']} unanswerable questions written "
                   "by hand" if "how_written" in source else f"{source['queries']} queries ({source['query_sampling']})")
        print(f"{name}: {source['package']} {source['version']}: {source['documents']} documents, {queries} -> {out_dir}")
        print(f"  dropped {source['dropped']}; without query {source['documents_without_query']}")
        print(f"  {source['load']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
