"""Doc sets from Debian documentation packages: HTML -> sections -> corpus + golden set (no network here)."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from experiments.datasets import doc_sets
from experiments.datasets.doc_sets import builder, packages
from experiments.datasets.doc_sets.html_sections import Section, clean_heading, parse_sections
from experiments.datasets.doc_sets.sampling import (
    doc_id,
    golden_items,
    is_generic_heading,
    sample_queries,
    select_sections,
)
from experiments.datasets.doc_sets.specs import load_specs, spec_from_entry

LONG = " ".join(f"word{i}" for i in range(40))  # 40 words: above the 30-word body floor

SPHINX = f"""<!DOCTYPE html><html><head><title>Programming FAQ</title><script>var x = 1;</script></head>
<body>
<div class="sphinxsidebar"><h3>Navigation</h3><p>sidebar text {LONG}</p></div>
<div class="body" role="main">
<section id="programming-faq">
<h1>Programming FAQ<a class="headerlink" href="#programming-faq">¶</a></h1>
<nav class="contents" id="contents"><p class="topic-title">Contents</p><ul><li>toc entry</li></ul></nav>
<section id="general-questions">
<h2>General Questions<a class="headerlink" href="#general-questions">¶</a></h2>
<section id="how-do-i-share-globals">
<span id="faq-share"></span><h3>How do I share global variables across modules?<a class="headerlink" href="#x">¶</a></h3>
<p>The canonical way is a <code>config</code> module. {LONG}</p>
<p>Second paragraph.</p>
<div class="highlight"><pre>import config
config.x = 1</pre></div>
</section>
<section id="short">
<h3>Why is this answer short?</h3>
<p>Because it is.</p>
</section>
<section id="intro">
<h3>Introduction</h3>
<p>Generic heading, long body. {LONG}</p>
</section>
<section id="dup-a">
<h3>What is Python?</h3>
<p>First copy of an ambiguous heading. {LONG}</p>
</section>
<section id="dup-b">
<h3>What is Python</h3>
<p>Second copy of an ambiguous heading, other body. {LONG}</p>
</section>
<section id="same-body">
<h3>How do I copy a body twice?</h3>
<p>The canonical way is a <code>config</code> module. {LONG}</p>
<p>Second paragraph.</p>
<div class="highlight"><pre>import config
config.x = 1</pre></div>
</section>
</section>
</section>
</div>
<div class="footer">footer {LONG}</div>
</body></html>"""

DOCBOOK = f"""<?xml version="1.0" encoding="UTF-8" standalone="no"?>
<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Transitional//EN" "x.dtd"><html xmlns="http://www.w3.org/1999/xhtml">
<head><meta http-equiv="Content-Type" content="text/html; charset=UTF-8" /><title>第 7 章</title></head><body>
<div class="navheader"><table><tr><th>第 7 章 Debian 软件包管理系统基础</th></tr></table></div>
<div class="chapter"><div class="titlepage"><div><div><h1 class="title"><a id="pkg-basics"></a>第 7 章 Debian 软件包管理系统基础</h1></div></div></div>
<div class="toc"><p><strong>目录</strong></p><dl class="toc"><dt>7.1. 什么是 Debian 软件包？</dt></dl></div>
<div class="section"><div class="titlepage"><div><div><h2 class="title"><a id="package"></a>7.1. 什么是 Debian 软件包？</h2></div></div></div>
<p>{"软件包通常包含了实现一组相关命令或功能所需的所有文件。" * 4}</p>
<div class="table"><p class="title"><b>表 7.1</b></p><table><tr><td>dpkg</td><td>底层工具</td></tr></table></div>
</div>
<div class="section"><div class="titlepage"><div><div><h2 class="title"><a id="tools"></a>7.2. 工具</h2></div></div></div>
<p>{"这一节的标题太短了，但是正文足够长。" * 5}</p>
</div>
</div>
<div class="footnotes"><p>[1] 脚注 {"不属于任何一节。" * 10}</p></div>
<div class="navfooter"><p>上一页 下一页</p></div>
</body></html>"""


def by_heading(sections: list[Section]) -> dict[str, Section]:
    return {section.heading: section for section in sections}


def test_sphinx_sections_bodies_exclude_heading_navigation_and_toc():
    sections = parse_sections(SPHINX, "faq/programming.html")
    headings = [s.heading for s in sections]
    assert headings == [
        "Programming FAQ",
        "General Questions",
        "How do I share global variables across modules?",
        "Why is this answer short?",
        "Introduction",
        "What is Python?",
        "What is Python",
        "How do I copy a body twice?",
    ]  # the sidebar's "Navigation" heading is outside the main content; ¶ marks are gone
    share = by_heading(sections)["How do I share global variables across modules?"]
    assert share.level == 3
    assert share.anchor == "how-do-i-share-globals"
    assert "How do I share" not in share.body
    assert share.body.startswith("The canonical way is a config module. word0")
    assert (
        "\n\nSecond paragraph.\n\nimport config\nconfig.x = 1" in share.body
    )  # paragraphs and <pre> lines kept
    assert by_heading(sections)["Programming FAQ"].body == ""  # the contents <nav> is not text
    assert not any("sidebar" in s.body or "footer" in s.body or "var x" in s.body for s in sections)


def test_docbook_sections_strip_numbering_toc_footnotes_and_chapter_prefix():
    sections = parse_sections(DOCBOOK.encode("utf-8"), "pkg-basics.zh-cn.html")
    assert [s.heading for s in sections] == ["Debian 软件包管理系统基础", "什么是 Debian 软件包？", "工具"]
    package = by_heading(sections)["什么是 Debian 软件包？"]
    assert package.anchor == "package"
    assert package.body.startswith("软件包通常包含")
    assert "dpkg | 底层工具" in package.body  # table cells kept, separated
    assert "什么是 Debian 软件包" not in package.body
    assert all("脚注" not in s.body and "下一页" not in s.body for s in sections)
    assert by_heading(sections)["Debian 软件包管理系统基础"].body == ""  # only the chapter's toc followed it


def test_selection_filters_short_bodies_generic_and_ambiguous_headings_and_duplicate_bodies():
    selection = select_sections(parse_sections(SPHINX, "faq/programming.html"))
    documents = [s.heading for s in selection.documents]
    queries = [s.heading for s in selection.queries]
    # dropped from the corpus: empty/short bodies, and the later copy of a duplicate body
    assert documents == [
        "How do I share global variables across modules?",
        "Introduction",
        "What is Python?",
        "What is Python",
    ]
    assert selection.dropped == {"body < 30 words": 3, "duplicate body": 1}
    # kept as distractors without a query: the generic heading and both copies of the ambiguous one
    assert queries == ["How do I share global variables across modules?"]
    assert selection.no_query == {"generic heading": 1, "heading not unique": 2}


def test_heading_rules_and_word_counts():
    assert clean_heading("7.1. 什么是 Debian 软件包？") == "什么是 Debian 软件包？"
    assert clean_heading("第 7 章 Debian 软件包管理系统基础") == "Debian 软件包管理系统基础"
    assert clean_heading("附录 A. 附录标题") == "附录标题"
    assert clean_heading("2.3.4 Sorting  Basics ¶") == "Sorting Basics"
    assert clean_heading("Chapter 3. Getting Started") == "Getting Started"
    assert clean_heading("x11 forwarding over ssh") == "x11 forwarding over ssh"  # not numbering
    assert is_generic_heading("Introduction") and is_generic_heading("Notes:") and is_generic_heading("目录")
    assert not is_generic_heading("Introduction to sockets")


def test_doc_ids_are_unique_relative_paths_and_golden_items_point_at_them():
    sections = parse_sections(SPHINX, "faq/programming.html")
    ids = [doc_id(s) for s in sections]
    assert len(set(ids)) == len(ids)
    share = by_heading(sections)["How do I share global variables across modules?"]
    assert doc_id(share) == "faq/programming/002-how-do-i-share-globals.txt"
    zh = parse_sections(DOCBOOK, "pkg-basics.zh-cn.html")
    assert doc_id(zh[1]) == "pkg-basics/001-package.txt"
    [item] = golden_items("python_faq-en", [share])
    assert item == {
        "id": "python_faq-en-0001",
        "question": "How do I share global variables across modules?",
        "relevant_doc_ids": ["faq/programming/002-how-do-i-share-globals.txt"],
        "category": "faq/programming",
        "meta": {"page": "faq/programming.html", "anchor": "how-do-i-share-globals", "heading_level": 3},
    }


def test_query_sampling_is_deterministic_and_keeps_page_order():
    sections = [Section("p.html", i, 2, f"Question number {i} here", f"a{i}", LONG) for i in range(50)]
    first = sample_queries("set", sections, 10)
    assert first == sample_queries("set", list(sections), 10)
    assert [s.index for s in first] == [2, 4, 5, 10, 19, 23, 25, 35, 39, 41]  # smallest sha256("set:<doc id>")
    assert sample_queries("other-set", sections, 10) != first  # the set name seeds the choice
    assert sample_queries("set", sections, None) == sections


def test_written_set_loads_as_a_local_dataset(tmp_path, monkeypatch):
    """build() without apt: a fake package folder stands in for the unpacked .deb."""
    from experiments.datasets.local import load_local
    from experiments.datasets.settings import LocalDataset

    def fake_extract(cmd, check=True):  # dpkg-deb -x DEB DIR
        target = Path(cmd[-1]) / "usr/share/doc/demo/faq"
        target.mkdir(parents=True)
        (target / "programming.html").write_text(SPHINX, encoding="utf-8")
        (target / "index.html").write_text(SPHINX, encoding="utf-8")

    monkeypatch.setattr(packages.subprocess, "run", fake_extract)
    monkeypatch.setattr(
        builder, "package_info", lambda deb: packages.Package("demo-doc", "1.0-1", Path(deb), "0" * 64)
    )
    spec = doc_sets.DocSetSpec(
        name="demo_faq-en",
        package="demo-doc",
        root="usr/share/doc/demo",
        include=("faq/*.html",),
        exclude=("faq/index.html",),
    )
    out = tmp_path / "demo_faq-en"
    source = doc_sets.build(spec, out, deb=tmp_path / "demo-doc_1.0-1_all.deb")
    assert source["package"] == "demo-doc" and source["version"] == "1.0-1"
    assert source["documents"] == 4 and source["queries"] == 1 and source["pages"] == 1
    assert json.loads((out / "SOURCE.json").read_text(encoding="utf-8"))["deb_sha256"] == "0" * 64
    dataset = load_local(
        LocalDataset(name="demo_faq-en", corpus_dir=str(out / "corpus"), golden=str(out / "golden.jsonl"))
    )
    assert len(dataset.documents) == 4
    [item] = dataset.golden
    assert item.relevant_doc_ids == ("faq/programming/002-how-do-i-share-globals.txt",)
    assert item.relevant_doc_ids[0] in {doc.id for doc in dataset.documents}


@pytest.mark.skipif(
    not (os.environ.get("RAGTUNE_APT_TESTS") and shutil.which("apt-get") and shutil.which("dpkg-deb")),
    reason="downloads a Debian package with apt-get (network, apt lists): set RAGTUNE_APT_TESTS=1 on Debian/Ubuntu",
)
def test_build_from_apt(tmp_path):  # pragma: no cover - network
    source = doc_sets.build(doc_sets.SPECS["debian_faq-zh"], tmp_path / "set", deb_dir=tmp_path / "debs")
    assert source["package"] == "debian-faq-zh-cn"
    assert source["queries"] > 50 and (tmp_path / "set" / "golden.jsonl").stat().st_size > 0


@pytest.mark.parametrize("entry, message", [
    ({"package": "p"}, "every entry needs a name"),
    ({"name": "s", "package": "p", "root": "r", "include": ["*.html"], "lang": "en"}, "set s: unknown key(s) ['lang']"),
    ({"name": "s", "package": "p", "include": ["*.html"]}, "set s: missing key(s) ['root']"),
    ({"name": "s", "package": "p", "root": "r", "include": "*.html"}, "include must be a list of glob patterns"),
    ({"name": "s", "package": "p", "root": "r", "include": ["*"], "max_queries": True}, "max_queries must be int"),
    ({"name": "s", "package": "p", "root": "r", "include": ["*"], "corpus_format": "pdf"},
     "set s: corpus_format must be one of ['text', 'html', 'docx'], got 'pdf'"),
])
def test_a_bad_set_entry_fails_naming_the_set_and_the_key(entry, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        spec_from_entry(entry, Path("specs.yaml"))


def test_a_set_defined_twice_is_refused(tmp_path):
    entry = "- {name: s, package: p, root: r, include: ['*.html']}\n"
    (tmp_path / "specs.yaml").write_text(entry * 2, encoding="utf-8")
    with pytest.raises(ValueError, match="set s is defined twice"):
        load_specs(tmp_path / "specs.yaml")
