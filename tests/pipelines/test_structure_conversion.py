"""HTML and PDF files in a local corpus keep their structure: headings the markdown chunker turns into heading paths,
tables as Markdown tables, and spans golden quotes locate in."""

import json
from pathlib import Path

import pytest
from haystack.document_stores.in_memory import InMemoryDocumentStore

from experiments.datasets.golden.evidence import load_golden
from experiments.runs.config import compose
from pipelines.conversion import convert_files
from pipelines.index import build_index, ingest_spec
from tests.support.pdf_files import Bookmark, write_pdf

HTML = """<!DOCTYPE html><html><head><meta charset="utf-8"><title>Office guide</title></head><body>
<nav><a href="/">Intranet</a></nav>
<h1>Office guide</h1>
<p>Every office has a <b>quiet room</b>.</p>
<h2>Opening hours</h2>
<table><tr><th>Office</th><th>Opens</th><th>Closes</th></tr>
<tr><td>Boston</td><td>07:30</td><td>19:00</td></tr><tr><td>上海</td><td>08:00</td><td>20:00</td></tr></table>
<h2>Parking</h2><h3>Bicycles</h3><p>Bicycles go to the basement rack.</p>
</body></html>"""
PAGES = [
    [
        "1 Travel policy",
        "Hotels are booked through the travel desk.",
        [("City", "Nightly limit"), ("London", "310 USD"), ("Shanghai", "900 CNY")],
    ],
    ["2 Meals", "The meal allowance is 55 USD a day."],
]
OUTLINE = [Bookmark("Travel policy", 0, top=740), Bookmark("Meals", 1, top=740)]
GOLDEN = [
    {
        "id": "html-table",
        "question": "When does the Shanghai office close?",
        "reference_answer": "20:00",
        "evidence": ["| 上海 | 08:00 | 20:00 |"],
    },
    {
        "id": "html-text",
        "question": "What does every office have?",
        "reference_answer": "a quiet room",
        "evidence": ["Every office has a quiet room."],
        "source": "guide.html",
    },  # the page writes it in bold
    {
        "id": "pdf-table",
        "question": "What is the hotel limit in London?",
        "reference_answer": "310 USD",
        "evidence": ["| London | 310 USD |"],
    },
    {
        "id": "pdf-text",
        "question": "What is the meal allowance?",
        "reference_answer": "55 USD",
        "evidence": ["The meal allowance is 55 USD a day."],
    },
]


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "guide.html").write_text(HTML, encoding="utf-8")
    write_pdf(tmp_path / "corpus" / "travel.pdf", PAGES, OUTLINE)
    return tmp_path / "corpus"


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


def test_html_and_pdf_become_markdown_headings_and_tables(corpus: Path):
    docs, skipped = convert_files(corpus, _files(corpus))
    assert skipped == {}
    assert {doc.id: doc.content for doc in docs} == {
        "guide.html": "# Office guide\n\nEvery office has a quiet room.\n\n## Opening hours\n\n"
        "| Office | Opens | Closes |\n| --- | --- | --- |\n| Boston | 07:30 | 19:00 |\n"
        "| 上海 | 08:00 | 20:00 |\n\n## Parking\n\n### Bicycles\n\nBicycles go to the basement rack.",
        "travel.pdf": "# 1 Travel policy\nHotels are booked through the travel desk.\n\n"
        "| City | Nightly limit |\n| --- | --- |\n| London | 310 USD |\n| Shanghai | 900 CNY |\f"
        "\n# 2 Meals\nThe meal allowance is 55 USD a day.",
    }


@pytest.mark.parametrize("chunker", ["recursive", "markdown"])
def test_chunk_spans_locate_golden_quotes_in_html_and_pdf(corpus: Path, tmp_path: Path, chunker: str):
    docs, skipped = convert_files(corpus, _files(corpus))
    golden_path = tmp_path / "golden.jsonl"
    golden_path.write_text(
        "".join(json.dumps(item, ensure_ascii=False) + "\n" for item in GOLDEN), encoding="utf-8"
    )
    golden = load_golden(golden_path, docs, skipped)
    cfg = compose([f"ingest={chunker}", "ingest.chunk_size=40", "ingest.chunk_overlap=0"])
    store = InMemoryDocumentStore()
    build_index(docs, ingest_spec(cfg.ingest, None), store, tmp_path / "cache", "fp")
    chunks = store.filter_documents()
    texts = {doc.id: doc.content for doc in docs}
    for item in golden:
        ((evidence,),) = item.evidence_spans
        holders = [
            c
            for c in chunks
            if c.meta["doc_id"] == evidence.doc_id
            and c.meta["span"][0] <= evidence.start
            and evidence.end <= c.meta["span"][1]
        ]
        assert holders, item.id
        start, end = holders[0].meta["span"]
        assert texts[evidence.doc_id][start:end].strip() in holders[0].content
        assert item.reference_answer in texts[evidence.doc_id][start:end]
    if chunker == "markdown":
        paths = {(c.meta["doc_id"], tuple(c.meta["heading_path"])) for c in chunks}
        assert paths == {
            ("guide.html", ("Office guide",)),
            ("guide.html", ("Office guide", "Opening hours")),
            ("guide.html", ("Office guide", "Parking", "Bicycles")),
            ("travel.pdf", ("1 Travel policy",)),
            ("travel.pdf", ("2 Meals",)),
        }


def test_an_html_page_in_an_undeclared_charset_is_decoded_as_a_text_file_is(tmp_path: Path):
    (tmp_path / "menu.html").write_bytes("<body><p>Le café ouvre à 9 heures.</p></body>".encode("latin-1"))
    docs, skipped = convert_files(tmp_path, [tmp_path / "menu.html"], encoding="latin-1")
    assert [(doc.content, doc.meta["encoding"]) for doc in docs] == [
        ("Le café ouvre à 9 heures.", "iso8859-1")
    ]
    with pytest.raises(ValueError, match="menu.html: not utf-8 text .*, and its encoding is uncertain"):
        convert_files(tmp_path, [tmp_path / "menu.html"])  # auto: Latin-1 and cp1250 read it alike, no guess
