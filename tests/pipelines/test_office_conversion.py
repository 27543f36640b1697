"""Word, PowerPoint, Excel and CSV files in a local corpus: canonical text, spans, golden quotes, skipped files.

The files are written here with python-docx, python-pptx and openpyxl, the libraries Haystack's converters read
them with, so no binary fixture is checked in.
"""

import json
from pathlib import Path

import docx
import openpyxl
import pptx
import pytest
from haystack.document_stores.in_memory import InMemoryDocumentStore

from experiments.datasets.golden.evidence import load_golden
from experiments.datasets.golden.items import GoldenError
from experiments.runs.config import compose
from pipelines.conversion import convert_files
from pipelines.index import build_index, ingest_spec
from tests.support.run_py import job_dir, run

DOCX_TEXT = (
    "Travel policy\n"
    "Hotels are booked through the travel desk.\n"
    "| City     | Nightly limit |\n"
    "| -------- | ------------- |\n"
    "| London   | $310          |\n"
    "| Shanghai | ¥900          |\n"
    "Receipts are required for every night."
)
PPTX_TEXT = "Q1 results\nRevenue grew 12% over the quarter.\fQ2 plan\nHire two support engineers in Berlin."
XLSX_TEXT = (
    "## 办公用品\n\n"
    "|    | A      | B    |\n"
    "|---:|:-------|:-----|\n"
    "|  1 | 品名   | 单价 |\n"
    "|  2 | 订书机 | 35   |\n"
    "|  3 | 白板笔 | 6    |\n\n"
    "## Staff\n\n"
    "|    | A            | B         |\n"
    "|---:|:-------------|:----------|\n"
    "|  1 | Name         | Team      |\n"
    "|  2 | Ada Lovelace | Analytics |"
)
CSV_TEXT = "部门,负责人,电话\n财务部,王芳,8021\n信息技术部,李雷,8045"
GOLDEN = [
    {"id": "docx", "question": "What is the nightly hotel limit in London?", "reference_answer": "$310",
     "evidence": ["| London | $310 |"]},
    {"id": "pptx", "question": "Where will the two support engineers be hired?", "reference_answer": "Berlin",
     "evidence": ["Hire two support engineers in Berlin."], "source": "slides/quarterly.pptx"},
    {"id": "xlsx", "question": "白板笔的单价是多少？", "reference_answer": "6", "evidence": ["白板笔 | 6"]},
    {"id": "csv", "question": "信息技术部的负责人是谁？", "reference_answer": "李雷", "evidence": ["信息技术部,李雷,8045"]},
]


def _write_office_corpus(corpus: Path) -> None:
    """A .docx with a heading, paragraphs and a table, a two-slide .pptx, a two-sheet .xlsx and a Chinese .csv."""
    (corpus / "slides").mkdir(parents=True)
    document = docx.Document()
    document.add_heading("Travel policy", level=1)
    document.add_paragraph("Hotels are booked through the travel desk.")
    table = document.add_table(rows=3, cols=2)
    for row, cells in zip(table.rows, [("City", "Nightly limit"), ("London", "$310"), ("Shanghai", "¥900")],
                          strict=True):
        for cell, text in zip(row.cells, cells, strict=True):
            cell.text = text
    document.add_paragraph("Receipts are required for every night.")
    document.save(corpus / "travel.docx")

    deck = pptx.Presentation()
    for title, body in [("Q1 results", "Revenue grew 12% over the quarter."),
                        ("Q2 plan", "Hire two support engineers in Berlin.")]:
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = title
        slide.placeholders[1].text = body
    deck.save(corpus / "slides" / "quarterly.pptx")

    workbook = openpyxl.Workbook()
    supplies = workbook.active
    supplies.title = "办公用品"
    for row in [("品名", "单价"), ("订书机", 35), ("白板笔", 6)]:
        supplies.append(row)
    staff = workbook.create_sheet("Staff")
    for row in [("Name", "Team"), ("Ada Lovelace", "Analytics")]:
        staff.append(row)
    workbook.create_sheet("Empty")  # no cells: no section in the text
    workbook.save(corpus / "prices.xlsx")

    (corpus / "contacts.csv").write_text(CSV_TEXT.replace("\n", "\r\n") + "\r\n", encoding="utf-8-sig")


def _write_golden(path: Path, items: list[dict]) -> Path:
    path.write_text("".join(json.dumps(item, ensure_ascii=False) + "\n" for item in items), encoding="utf-8")
    return path


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    _write_office_corpus(tmp_path / "corpus")
    return tmp_path / "corpus"


def test_office_files_and_csv_become_canonical_documents(corpus: Path):
    docs, skipped = convert_files(corpus, _files(corpus), {"prices.xlsx": {"tenant": "acme"}})
    assert skipped == {}
    by_id = {doc.id: doc for doc in docs}
    assert {doc_id: doc.content for doc_id, doc in by_id.items()} == {
        "contacts.csv": CSV_TEXT,  # the BOM and CRLFs gone, the rows as written
        "prices.xlsx": XLSX_TEXT,  # one `## sheet` section per non-empty sheet, in workbook order
        "slides/quarterly.pptx": PPTX_TEXT,  # a form feed between slides, as between PDF pages
        "travel.docx": DOCX_TEXT,
    }
    # Flat metadata only: the converters' nested document properties and sheet names stay out.
    assert by_id["prices.xlsx"].meta == {"file_path": "prices.xlsx", "doc_id": "prices.xlsx", "tenant": "acme"}
    assert by_id["travel.docx"].meta == {"file_path": "travel.docx", "doc_id": "travel.docx"}


@pytest.mark.parametrize("chunker", ["recursive", "markdown"])
def test_chunk_spans_locate_golden_quotes_from_every_format(corpus: Path, tmp_path: Path, chunker: str):
    docs, skipped = convert_files(corpus, _files(corpus))
    golden = load_golden(_write_golden(tmp_path / "golden.jsonl", GOLDEN), docs, skipped)
    cfg = compose([f"ingest={chunker}", "ingest.chunk_size=40", "ingest.chunk_overlap=0"])
    store = InMemoryDocumentStore()
    build_index(docs, ingest_spec(cfg.ingest, None), store, tmp_path / "cache", "fp")
    chunks = store.filter_documents()
    texts = {doc.id: doc.content for doc in docs}
    for item in golden:
        ((evidence,),) = item.evidence_spans
        holders = [c for c in chunks if c.meta["doc_id"] == evidence.doc_id
                   and c.meta["span"][0] <= evidence.start and evidence.end <= c.meta["span"][1]]
        assert holders, item.id
        start, end = holders[0].meta["span"]
        assert texts[evidence.doc_id][start:end].strip() in holders[0].content
        assert texts[evidence.doc_id][evidence.start : evidence.end] in holders[0].content
        assert item.reference_answer in holders[0].content
    if chunker == "markdown":
        sheets = {tuple(c.meta["heading_path"]) for c in chunks if c.meta["doc_id"] == "prices.xlsx"}
        assert sheets == {("办公用品",), ("Staff",)}


def test_unreadable_office_files_are_skipped_with_their_reason(corpus: Path, tmp_path: Path):
    whole = (corpus / "travel.docx").read_bytes()
    (corpus / "broken.docx").write_bytes(whole[: len(whole) // 2])  # cut off: no ZIP directory
    # Office saves a password-protected workbook inside an OLE compound file, whose first bytes are these.
    (corpus / "locked.xlsx").write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(504))
    (corpus / "renamed.pptx").write_bytes((corpus / "prices.xlsx").read_bytes())  # a ZIP, but no presentation
    docs, skipped = convert_files(corpus, _files(corpus))
    assert {doc.id for doc in docs} == {"contacts.csv", "prices.xlsx", "slides/quarterly.pptx", "travel.docx"}
    assert skipped == {
        "broken.docx": "not a readable .docx file (damaged or not a ZIP package: File is not a zip file)",
        "locked.xlsx": "not a readable .xlsx file: it is password-protected (encrypted), or an old binary Office "
                       "file renamed to .xlsx; save it without a password in the .xlsx format",
        "renamed.pptx": "no text extracted (empty, a PDF without a text layer, or a converter error logged above)",
    }
    cites_locked = {"id": "q", "question": "Price?", "evidence": ["35"], "source": "locked.xlsx"}
    with pytest.raises(GoldenError) as raised:
        load_golden(_write_golden(tmp_path / "golden.jsonl", [cites_locked]), docs, skipped)
    assert f"source 'locked.xlsx' was skipped when the corpus was converted: {skipped['locked.xlsx']}" in str(
        raised.value
    )


def test_a_gbk_csv_is_decoded_like_a_gbk_text_file(tmp_path: Path):
    (tmp_path / "contacts.csv").write_bytes(CSV_TEXT.encode("gbk"))
    (doc,), skipped = convert_files(tmp_path, [tmp_path / "contacts.csv"], encoding="gbk")
    assert (doc.content, doc.meta["encoding"], skipped) == (CSV_TEXT, "gbk", {})


@pytest.mark.slow
def test_run_py_answers_from_a_table_cell_of_an_office_corpus(tmp_path: Path):
    _write_office_corpus(tmp_path / "corpus")
    golden = _write_golden(tmp_path / "golden.jsonl", GOLDEN)
    out = job_dir(tmp_path, "office")
    run(tmp_path, "dataset=local", f"dataset.corpus_dir={tmp_path / 'corpus'}", f"dataset.golden={golden}",
        "pipeline=bm25", "answer=extractive", "+pipeline.answer=${answer.stage}", f"hydra.run.dir={out}")
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["index/chunks"] >= 4 and metrics["retrieval/hit_at_1"] == 1.0
    records = {r["id"]: r for r in map(json.loads, (out / "per_question.jsonl").read_text().splitlines())}
    assert all(record["context/hit_at_1"] == 1.0 for record in records.values())
    assert "白板笔 | 6" in " ".join(records["xlsx"]["answer"].split())  # the row of the Excel cell asked about
    assert "李雷" in records["csv"]["answer"]
    assert "Berlin" in records["pptx"]["answer"]

