import logging
from pathlib import Path

import pytest
from haystack import Pipeline
from pypdf import PdfWriter
from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject

from pipelines.conversion import build_conversion_pipeline, convert_files

HTML = """<html><head><title>Refund policy</title></head><body>
<nav><a href="/">Home</a> | <a href="/about">About</a></nav>
<article><h1>Refund policy</h1>
<p>Customers may request a refund within <b>30 days</b> of purchase. Refunds go to the original payment method.</p>
<h2>Exceptions</h2><p>Gift cards are not refundable once activated.</p></article>
<footer>Copyright 2024 Example Corp</footer></body></html>"""


def _write_pdf(path: Path, text: str) -> None:
    """A one-page PDF with real text, built with pypdf only (no extra dependency)."""
    writer = PdfWriter()
    page = writer.add_blank_page(612, 792)
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
    stream.set_data(f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode("latin-1"))
    page.replace_contents(stream)
    writer.write(path)


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
    _write_pdf(tmp_path / "warranty.pdf", "The warranty covers parts and labour for two years.")
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
        "HTMLToDocument",
        "PyPDFToDocument",
        "DocumentJoiner",
        "DocumentCleaner",
    }


def test_convert_all_types_and_quotes_survive(corpus: Path, caplog):
    with caplog.at_level(logging.WARNING, logger="pipelines.conversion"):
        docs = convert_files(corpus, _files(corpus), {"notes.txt": {"tenant": "acme", "acl": ["staff"]}})
    by_id = {d.id: d for d in docs}
    assert list(by_id) == ["guides/setup.md", "notes.txt", "policy.html", "warranty.pdf", "zh.txt"]
    for doc in docs:
        assert doc.meta["doc_id"] == doc.id

    setup = by_id["guides/setup.md"].content
    assert setup.startswith("# Setup\n\n")  # raw markdown headings kept for the markdown chunker
    assert "## Network\n\nOpen port 8443 on the firewall." in setup
    assert "\r" not in setup
    assert "Install the  agent first." in setup  # inner whitespace is not collapsed

    notes = by_id["notes.txt"]
    assert notes.content.startswith("The caf\u00e9 opens")  # BOM dropped, NFC applied
    assert "\n\n\nSecond   paragraph stays intact." in notes.content
    assert notes.meta["tenant"] == "acme" and notes.meta["acl"] == ["staff"]

    html = by_id["policy.html"].content
    assert "Customers may request a refund within 30 days of purchase." in html
    assert "Gift cards are not refundable once activated." in html
    assert "Home" not in html  # trafilatura dropped the navigation boilerplate

    assert "The warranty covers parts and labour for two years." in by_id["warranty.pdf"].content
    assert "客户可以在购买后三十天内申请退款" in by_id["zh.txt"].content

    messages = " ".join(r.getMessage() for r in caplog.records)
    assert "skipped 1 file(s) with unsupported types ['.png']" in messages
    assert "produced no text: empty.txt" in messages


def test_doc_ids_are_posix_relative_paths(corpus: Path):
    docs = convert_files(corpus, [corpus / "guides" / "setup.md"])
    assert [d.id for d in docs] == ["guides/setup.md"]


def test_conversion_is_deterministic(corpus: Path):
    first = convert_files(corpus, _files(corpus))
    second = convert_files(corpus, list(reversed(_files(corpus))))
    assert [(d.id, d.content, d.meta) for d in first] == [(d.id, d.content, d.meta) for d in second]


def test_empty_corpus_is_an_error(tmp_path: Path):
    (tmp_path / "a.png").write_bytes(b"x")
    with pytest.raises(ValueError, match="no documents could be converted"):
        convert_files(tmp_path, [tmp_path / "a.png"])
    with pytest.raises(ValueError, match="no documents could be converted from 0 file"):
        convert_files(tmp_path, [])


def test_file_outside_root_is_an_error(tmp_path: Path):
    (tmp_path / "in").mkdir()
    outside = tmp_path / "x.txt"
    outside.write_text("x", encoding="utf-8")
    with pytest.raises(ValueError, match="not inside the corpus root"):
        convert_files(tmp_path / "in", [outside])
