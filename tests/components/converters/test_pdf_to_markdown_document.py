from pathlib import Path

from haystack.components.converters import PyPDFToDocument
from haystack.dataclasses import ByteStream

from components.converters.pdf_to_markdown_document import (
    OutlineHeading,
    PDFToMarkdownDocument,
    pdf_to_markdown,
    with_headings,
)
from tests.support.pdf_files import Bookmark, write_pdf

PAGES = [
    [
        "1 Travel policy",
        "Hotels are booked through the travel desk.",
        [("City", "Nightly limit"), ("London", "310 USD"), ("Shanghai", "900 CNY")],
        "Receipts are required for every night.",
        "1.1 Meals",
        "The meal allowance is 55 USD a day.",
    ],
    ["# of receipts per trip: at most 30.", "2 Approvals", "A manager approves each trip."],
]
OUTLINE = [
    Bookmark("Travel policy", 0, top=740),  # the page prints its number before the title
    Bookmark("1.1 MEALS", 0, level=2, top=560),  # case aside
    Bookmark("Forms", 1),  # not in the text, the page itself: a heading at the page's start
    Bookmark("Expenses", 1, top=400),  # not in the text, mid-page: no place for it, left out
    Bookmark("2 Approvals", 1, top=700),
]


def test_outline_entries_become_headings_where_they_stand_and_ruled_tables_markdown_tables(tmp_path: Path):
    text = pdf_to_markdown(write_pdf(tmp_path / "travel.pdf", PAGES, OUTLINE).read_bytes())
    assert text == (
        "# 1 Travel policy\n"
        "Hotels are booked through the travel desk.\n\n"
        "| City | Nightly limit |\n| --- | --- |\n| London | 310 USD |\n| Shanghai | 900 CNY |\n\n"
        "Receipts are required for every night.\n"
        "## 1.1 Meals\n"
        "The meal allowance is 55 USD a day.\f"
        "\n# Forms\n"  # a line break after the form feed: a heading starts a line
        " # of receipts per trip: at most 30.\n"  # a space: no heading the outline does not name
        "# 2 Approvals\n"
        "A manager approves each trip."
    )


def test_a_pdf_without_outline_or_tables_reads_as_haystacks_pypdf_converter_reads_it(tmp_path: Path):
    path = write_pdf(tmp_path / "plain.pdf", [["Plain text only.", "Second line."], ["Page two."]])
    (expected,) = PyPDFToDocument().run(sources=[path])["documents"]
    assert (
        pdf_to_markdown(path.read_bytes()) == expected.content == "Plain text only.\nSecond line.\fPage two."
    )


def test_a_framed_box_is_no_table(tmp_path: Path):
    path = write_pdf(tmp_path / "box.pdf", [["Before.", [("Note: closed on May 1.",)], "After."]])
    assert pdf_to_markdown(path.read_bytes()) == "Before.\nNote: closed on May 1.\nAfter."


def test_a_wrapped_title_is_one_heading_line_and_a_marked_line_is_not_marked_again():
    pages = ["Intro\n2.10. Storing the MIME type\nusing attributes\nBody text.", "Storing the MIME type"]
    headings = [OutlineHeading(2, "2.10. Storing the MIME type using attributes", 0, False)] * 2
    assert with_headings(pages, headings) == [
        "Intro\n## 2.10. Storing the MIME type using attributes\nBody text.",
        "Storing the MIME type",  # another page: not searched
    ]


def test_the_component_keeps_metadata_and_skips_a_damaged_file(tmp_path: Path):
    path = write_pdf(tmp_path / "travel.pdf", PAGES, OUTLINE)
    damaged = ByteStream(b"%PDF-1.7 cut off", meta={"file_path": "/x/damaged.pdf"})
    documents = PDFToMarkdownDocument().run(sources=[path, damaged], meta=[{"tenant": "acme"}, {}])[
        "documents"
    ]
    assert [doc.meta for doc in documents] == [{"file_path": "travel.pdf", "tenant": "acme"}]
    assert documents[0].content.startswith("# 1 Travel policy\n")
    assert isinstance(
        PDFToMarkdownDocument.from_dict(PDFToMarkdownDocument().to_dict()), PDFToMarkdownDocument
    )
