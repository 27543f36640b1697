from pathlib import Path

import pytest
from haystack import Pipeline

from pipelines.conversion import CorpusError, build_conversion_pipeline, convert_files
from pipelines.errors import UserError
from tests.support.pdf_files import write_pdf

GBK_TEXT = "员工年假为二十天。"
NO_TEXT = "no text extracted (empty, a PDF without a text layer, or a converter error logged above)"

HTML = """<html><head><title>Refund policy</title></head><body>
<nav><a href="/">Home</a> | <a href="/about">About</a></nav>
<article><h1>Refund policy</h1>
<p>Customers may request a refund within <b>30 days</b> of purchase. Refunds go to the original payment method.</p>
<h2>Exceptions</h2><p>Gift cards are not refundable once activated.</p></article>
<footer>Copyright 2024 Example Corp</footer></body></html>"""


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    (tmp_path / "guides").mkdir()
    (tmp_path / "guides" / "setup.md").write_text(
        "# Setup\r\n\r\nInstall the  agent first.\r\n\r\n## Network\r\n\r\nOpen port 8443 on the firewall.\r\n",
        encoding="utf-8",
    )
    (tmp_path / "notes.txt").write_text(
        "\ufeffThe cafe\u0301 opens at 9.\n\n\nSecond   paragraph stays intact.\n", encoding="utf-8"
    )
    (tmp_path / "policy.html").write_text(HTML, encoding="utf-8")
    (tmp_path / "zh.txt").write_text("退款政策：客户可以在购买后三十天内申请退款。\n", encoding="utf-8")
    write_pdf(tmp_path / "warranty.pdf", [["The warranty covers parts and labour for two years."]])
    (tmp_path / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    (tmp_path / "empty.txt").write_text("  \n", encoding="utf-8")
    return tmp_path


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


def test_pipeline_uses_haystack_components():
    pipeline = build_conversion_pipeline()
    assert isinstance(pipeline, Pipeline)
    kinds = {type(pipeline.get_component(name)).__name__ for name, _ in pipeline.graph.nodes(data=True)}
    assert kinds == {
        "FileTypeRouter",
        "TextFileToDocument",
        "HTMLToMarkdownDocument",
        "PDFToMarkdownDocument",
        "CSVToDocument",
        "DOCXToDocument",
        "PPTXToDocument",
        "XLSXToDocument",
        "DocumentJoiner",
        "DocumentCleaner",
    }


def test_convert_all_types_and_quotes_survive(corpus: Path):
    docs, skipped = convert_files(corpus, _files(corpus), {"notes.txt": {"tenant": "acme", "acl": ["staff"]}})
    by_id = {d.id: d for d in docs}
    assert list(by_id) == ["guides/setup.md", "notes.txt", "policy.html", "warranty.pdf", "zh.txt"]
    for doc in docs:
        assert doc.meta["doc_id"] == doc.id
        assert "encoding" not in doc.meta  # every text file here is UTF-8

    setup = by_id["guides/setup.md"].content
    assert setup.startswith("# Setup\n\n")  # raw markdown headings kept for the markdown chunker
    assert "## Network\n\nOpen port 8443 on the firewall." in setup
    assert "\r" not in setup
    assert "Install the  agent first." in setup  # inner whitespace is not collapsed

    notes = by_id["notes.txt"]
    assert notes.content.startswith("The caf\u00e9 opens")  # BOM dropped, NFC applied
    assert "\n\n\nSecond   paragraph stays intact." in notes.content
    assert notes.meta["tenant"] == "acme" and notes.meta["acl"] == ["staff"]

    assert by_id["policy.html"].content == (  # the article only: no navigation, no footer, no bold markers
        "# Refund policy\n\n"
        "Customers may request a refund within 30 days of purchase. Refunds go to the original payment method.\n\n"
        "## Exceptions\n\nGift cards are not refundable once activated."
    )

    assert "The warranty covers parts and labour for two years." in by_id["warranty.pdf"].content
    assert "客户可以在购买后三十天内申请退款" in by_id["zh.txt"].content

    assert skipped == {
        "empty.txt": NO_TEXT,
        "image.png": "unsupported file type .png (supported: .txt, .md, .markdown, .html, .htm, .pdf, .docx, .pptx, .xlsx, .csv)",
    }


def test_doc_ids_are_posix_relative_paths(corpus: Path):
    docs, skipped = convert_files(corpus, [corpus / "guides" / "setup.md"])
    assert [d.id for d in docs] == ["guides/setup.md"] and skipped == {}


def test_conversion_is_deterministic(corpus: Path):
    first = convert_files(corpus, _files(corpus))
    second = convert_files(corpus, list(reversed(_files(corpus))))
    assert [(d.id, d.content, d.meta) for d in first.documents] == [
        (d.id, d.content, d.meta) for d in second.documents
    ]
    assert first.skipped == second.skipped


def test_gbk_text_is_detected_or_decoded_as_configured(tmp_path: Path):
    (tmp_path / "zh.txt").write_bytes(GBK_TEXT.encode("gbk"))
    (tmp_path / "en.md").write_text("# Leave\n\nTwenty days.\n", encoding="utf-8")
    auto = {d.id: d for d in convert_files(tmp_path, _files(tmp_path)).documents}
    assert auto["zh.txt"].content == GBK_TEXT and auto["zh.txt"].meta["encoding"] == "gb18030"
    assert "encoding" not in auto["en.md"].meta  # UTF-8 is tried first
    forced = {d.id: d for d in convert_files(tmp_path, _files(tmp_path), encoding="gbk").documents}
    assert forced["zh.txt"].content == GBK_TEXT and forced["zh.txt"].meta["encoding"] == "gbk"
    assert forced["en.md"].content == "# Leave\n\nTwenty days." and forced["en.md"].meta["encoding"] == "gbk"


def test_undecodable_text_is_skipped_with_its_reason(tmp_path: Path):
    (tmp_path / "ok.txt").write_text("Twenty days.", encoding="utf-8")
    (tmp_path / "binary.txt").write_bytes(bytes(range(256)))
    (tmp_path / "zh.txt").write_bytes(GBK_TEXT.encode("gbk"))
    docs, skipped = convert_files(tmp_path, _files(tmp_path))
    assert [d.id for d in docs] == ["ok.txt", "zh.txt"]
    assert skipped == {
        "binary.txt": "not utf-8 text (invalid start byte: byte 0x80 at offset 128), "
        "and no other encoding was detected"
    }
    docs, skipped = convert_files(tmp_path, _files(tmp_path), encoding="utf-8")
    assert [d.id for d in docs] == ["ok.txt"]
    assert skipped == {
        "binary.txt": "not utf-8 text (invalid start byte: byte 0x80 at offset 128)",
        "zh.txt": "not utf-8 text (invalid start byte: byte 0xb9 at offset 2)",
    }


def test_empty_corpus_is_an_error_naming_the_reasons(tmp_path: Path):
    (tmp_path / "a.png").write_bytes(b"x")
    (tmp_path / "b.txt").write_bytes(b"\xff\xff")
    with pytest.raises(CorpusError) as excinfo:
        convert_files(tmp_path, _files(tmp_path), encoding="gbk")
    assert isinstance(excinfo.value, UserError) and isinstance(excinfo.value, ValueError)
    assert str(excinfo.value) == (
        f"{tmp_path}: no documents could be converted from 2 file(s)\n"
        "  a.png: unsupported file type .png (supported: .txt, .md, .markdown, .html, .htm, .pdf, .docx, .pptx, .xlsx, .csv)\n"
        "  b.txt: not gbk text (illegal multibyte sequence: byte 0xff at offset 0)"
    )
    with pytest.raises(CorpusError, match="no documents could be converted from 0 file"):
        convert_files(tmp_path, [])


def test_file_outside_root_is_an_error(tmp_path: Path):
    (tmp_path / "in").mkdir()
    outside = tmp_path / "x.txt"
    outside.write_text("x", encoding="utf-8")
    with pytest.raises(ValueError, match="not inside the corpus root"):
        convert_files(tmp_path / "in", [outside])
