"""Doc sets whose corpus is read through the product's converters (corpus_format html and docx): tables survive as
Markdown tables, and hand-written evidence quotes locate in the text as the product converts it."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import docx
import pytest
from haystack.components.converters import DOCXToDocument
from haystack.dataclasses import ByteStream

from experiments.datasets import doc_sets
from experiments.datasets.doc_sets import builder, packages, questions
from experiments.datasets.doc_sets.docx_files import FIXED_TIME, markdown_docx
from experiments.datasets.local import load_local
from experiments.datasets.settings import LocalDataset

PAGE = f"""<?xml version="1.0" encoding="UTF-8"?><html xmlns="http://www.w3.org/1999/xhtml"><head>
<meta http-equiv="Content-Type" content="text/html; charset=UTF-8"/><title>第 2 章</title></head><body>
<div class="navheader"><table><tr><th>导航页眉</th><td>上一页</td></tr></table></div>
<div class="chapter"><div class="titlepage"><h1 class="title"><a id="tools"></a>第 2 章 软件包工具</h1></div>
<div class="toc"><dl><dt>2.1. 工具列表</dt></dl></div>
<div class="section"><div class="titlepage"><div><h2 class="title"><a id="list"></a>2.1. 工具列表</h2></div></div>
<p>{"下面的表格列出常用的软件包管理工具。" * 4}</p>
<div class="table"><p class="title"><b>表 2.1. 工具</b></p><div class="table-contents"><table border="1">
<thead><tr><th>软件包</th><th>大小</th><th>说明</th></tr></thead>
<tbody><tr><td><code class="literal">apt-file</code></td><td>89</td><td>APT 软件包搜索工具</td></tr>
<tr><td><code class="literal">dpkg</code></td><td>5989</td><td>底层软件包管理系统</td></tr></tbody>
</table></div></div>
</div></div></body></html>"""
# Written for the text format (`.txt` doc ids), as maint_guide-zh's questions are: every format reads them.
QUESTIONS = [
    {
        "id": "t-001",
        "question": "apt-file 这个包多大？",
        "reference_answer": "89",
        "evidence": ["apt-file | 89", "APT 软件包搜索工具"],
        "source": "ch02/001-list.txt",
        "category": "numeric",
    },
    {
        "id": "t-u01",
        "question": "apt-file 的缓存放在哪？",
        "answerable": False,
        "category": "unanswerable",
        "x_topic_doc": "ch02/001-list.txt",
    },
]


@pytest.fixture
def build_page(tmp_path, monkeypatch):
    """build(corpus_format) of PAGE as a one-page package with QUESTIONS; returns the set's folder."""

    def fake_extract(cmd, check=True):  # dpkg-deb -x DEB DIR
        target = Path(cmd[-1]) / "usr/share/doc/demo"
        target.mkdir(parents=True)
        (target / "ch02.html").write_text(PAGE, encoding="utf-8")

    monkeypatch.setattr(packages.subprocess, "run", fake_extract)
    monkeypatch.setattr(
        builder, "package_info", lambda deb: packages.Package("demo-doc", "1.0-1", Path(deb), "0" * 64)
    )
    (tmp_path / "t.jsonl").write_text(
        "".join(json.dumps(q, ensure_ascii=False) + "\n" for q in QUESTIONS), "utf-8"
    )
    monkeypatch.setattr(questions, "QUESTIONS_DIR", tmp_path)
    monkeypatch.setattr(questions, "MIN_ANSWERABLE", 1)
    monkeypatch.setattr(questions, "MIN_UNANSWERABLE", 1)

    def build(corpus_format: str) -> Path:
        spec = doc_sets.DocSetSpec(
            name="demo-zh",
            package="demo-doc",
            root="usr/share/doc/demo",
            include=("*.html",),
            language="zh",
            questions="t.jsonl",
            corpus_format=corpus_format,
        )
        out = tmp_path / corpus_format
        doc_sets.build(spec, out, deb=tmp_path / "demo-doc_1.0-1_all.deb")
        return out

    return build


def load(out: Path):
    return load_local(
        LocalDataset(name="demo-zh", corpus_dir=str(out / "corpus"), golden=str(out / "golden.jsonl"))
    )


def quoted(dataset, item_index: int = 0) -> list[str]:
    """The text under each located quote's first span."""
    item = dataset.golden[item_index]
    texts = {doc.id: doc.content for doc in dataset.documents}
    return [texts[spans[0].doc_id][spans[0].start : spans[0].end] for spans in item.evidence_spans]


def test_an_html_set_keeps_each_section_as_a_page_whose_table_the_converter_keeps(build_page):
    out = build_page("html")
    assert sorted(p.relative_to(out / "corpus").as_posix() for p in (out / "corpus").rglob("*")) == [
        "ch02",
        "ch02/001-list.html",
    ]
    golden = [json.loads(line) for line in (out / "golden.jsonl").read_text(encoding="utf-8").splitlines()]
    assert golden[0]["source"] == golden[1]["x_topic_doc"] == "ch02/001-list.html"
    dataset = load(out)
    [document] = dataset.documents
    assert document.content.startswith("## 工具列表\n")
    assert (
        "| 软件包 | 大小 | 说明 |\n| --- | --- | --- |\n| apt-file | 89 | APT 软件包搜索工具 |"
        in document.content
    )
    assert "导航页眉" not in document.content and "2.1. 工具列表" not in document.content  # navigation, toc
    assert quoted(dataset) == ["apt-file | 89", "APT 软件包搜索工具"]


def test_a_docx_set_reads_back_through_docx_to_document_with_its_table_and_spans(build_page):
    out = build_page("docx")
    [path] = (out / "corpus").rglob("*.docx")
    assert path.relative_to(out / "corpus").as_posix() == "ch02/001-list.docx"
    assert docx.Document(str(path)).paragraphs[0].style.name == "Heading 2"
    dataset = load(out)
    [document] = dataset.documents
    assert document.content.startswith("工具列表\n")
    assert "| apt-file | 89   | APT 软件包搜索工具 |" in document.content  # DOCXToDocument pads the cells
    assert [" ".join(text.split()) for text in quoted(dataset)] == ["apt-file | 89", "APT 软件包搜索工具"]


def test_a_quote_the_converted_text_lacks_fails_the_build_naming_it(build_page, tmp_path):
    flattened = dict(QUESTIONS[0], evidence=["apt-file 89"])  # the text format's row, not the table's
    (tmp_path / "t.jsonl").write_text(json.dumps(flattened, ensure_ascii=False) + "\n", "utf-8")
    with pytest.raises(doc_sets.DocSetError, match="evidence quote not found in 'ch02/001-list.html'"):
        build_page("html")


MARKDOWN = """## Heading two

A paragraph
with a line break.

- item one
- item two
  - nested item

```
code line

after a blank line
```

| name | value |
| --- | --- |
| a\\|b | 1 |
|  | empty key |"""


def test_markdown_becomes_word_headings_lists_and_tables_that_read_back_as_the_same_text():
    data = markdown_docx(MARKDOWN, "title")
    document = docx.Document(io.BytesIO(data))
    assert [p.style.name for p in document.paragraphs] == [
        "Heading 2",
        "Normal",
        "List Bullet",
        "List Bullet",
        "List Bullet",
        "Normal",
    ]
    assert document.core_properties.title == "title"
    [table] = document.tables
    assert [[cell.text for cell in row.cells] for row in table.rows] == [
        ["name", "value"],
        ["a|b", "1"],
        ["", "empty key"],
    ]
    [read] = DOCXToDocument(table_format="markdown").run(sources=[ByteStream(data)])["documents"]
    assert read.content.split("\n") == [
        "Heading two",
        "A paragraph",
        "with a line break.",
        "item one",
        "item two",
        "nested item",
        "code line",
        "",
        "after a blank line",
        "| name | value     |",
        "| ---- | --------- |",
        "| a\\|b | 1         |",
        "|      | empty key |",
    ]


def test_a_docx_file_is_the_same_bytes_every_time():
    first, second = markdown_docx(MARKDOWN, "title"), markdown_docx(MARKDOWN, "title")
    assert first == second
    with zipfile.ZipFile(io.BytesIO(first)) as package:
        assert {info.date_time for info in package.infolist()} == {FIXED_TIME}
        core = package.read("docProps/core.xml").decode()
    assert "1980-01-01T00:00:00Z" in core
