"""Sections -> documents and queries: the filters, the query rules and the seeded sampling that the package's
docstring describes (the same queries on every build: sampling is seeded by the set's name)."""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from components.common.words import prose_words
from experiments.datasets.base import seeded_rank
from experiments.datasets.doc_sets.html_sections import Section

# Headings that name a kind of section rather than what it says (compared lower-cased, numbering removed).
GENERIC_HEADINGS = frozenset(
    {
        "introduction", "contents", "table of contents", "notes", "note", "overview", "summary", "references",
        "see also", "acknowledgements", "acknowledgments", "example", "examples", "abstract", "preface", "index",
        "glossary", "footnotes", "conclusion", "further reading", "for more information", "more information",
        "further information", "next steps", "what's next", "related", "resources", "history", "license", "author",
        "authors",
        "目录", "简介", "介绍", "引言", "概述", "概要", "前言", "注意", "注释", "备注", "参考", "参考文献", "参见", "示例",
        "例子", "总结", "摘要", "致谢", "术语表", "索引", "更多信息", "历史", "作者", "许可", "版权",
    }
)
_SLUG = re.compile(r"[^a-z0-9]+")


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


def doc_id(section: Section, suffix: str = ".txt") -> str:
    """`<page without suffix>/<NNN>-<anchor slug><suffix>`: unique per heading, readable, the same on every build;
    `suffix` is the set's corpus format's (specs.CORPUS_SUFFIXES)."""
    page = re.sub(r"\.html?$", "", section.page)
    page = re.sub(r"\.zh-cn$", "", page)
    slug = _SLUG.sub("-", (section.anchor or "").lower()).strip("-")[:60].strip("-") or "section"
    return f"{page}/{section.index:03d}-{slug}{suffix}"


def sample_queries(name: str, sections: Sequence[Section], limit: int | None) -> list[Section]:
    """At most `limit` sections, those with the smallest SHA-256 of `<name>:<doc id>`, back in page order."""
    if limit is None or len(sections) <= limit:
        return list(sections)
    ranked = sorted(sections, key=lambda s: seeded_rank(name, doc_id(s)))
    kept = {doc_id(s) for s in ranked[:limit]}
    return [s for s in sections if doc_id(s) in kept]


def golden_items(name: str, sections: Sequence[Section], suffix: str = ".txt") -> list[dict[str, Any]]:
    """Golden JSONL records: the heading as question, its own section (its file's `suffix`) as the relevant
    document."""
    return [
        {
            "id": f"{name}-{number:04d}",
            "question": section.heading,
            "relevant_doc_ids": [doc_id(section, suffix)],
            "category": re.sub(r"(\.zh-cn)?\.html?$", "", section.page),
            "meta": {"page": section.page, "anchor": section.anchor, "heading_level": section.level},
        }
        for number, section in enumerate(sections, start=1)
    ]
