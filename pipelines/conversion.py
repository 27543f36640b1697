"""Files -> canonical source Documents (the text every character span in the project refers to).

No file is dropped silently: each one left out (unreadable, undecodable, unsupported type, no text) comes
back with the reason, so the run can show it and a golden item citing it can say why it is missing.
"""

from __future__ import annotations

import codecs
import io
import re
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import charset_normalizer
from haystack import Document, Pipeline
from haystack.components.converters import (
    CSVToDocument,
    DOCXToDocument,
    PPTXToDocument,
    TextFileToDocument,
    XLSXToDocument,
)
from haystack.components.joiners import DocumentJoiner
from haystack.components.preprocessors import DocumentCleaner
from haystack.components.routers import FileTypeRouter
from haystack.dataclasses import ByteStream
from tqdm import tqdm

from components.converters.html_to_markdown_document import HTMLToMarkdownDocument, html_codec
from components.converters.pdf_to_markdown_document import PDFToMarkdownDocument
from pipelines.errors import UserError

# Haystack's own mime lookup already maps .md/.markdown to text/markdown (haystack.utils.misc.CUSTOM_MIMETYPES),
# so no mimetypes.add_type() call is needed for the router to see markdown files.
DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
PPTX = "application/vnd.openxmlformats-officedocument.presentationml.presentation"
XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
# Python's own table lacks the Office types (only some systems' /etc/mime.types has them): the router
# registers them (additional_mimetypes -> mimetypes.add_type) as the pipeline is built, before a file is read.
OFFICE_SUFFIXES = {DOCX: ".docx", PPTX: ".pptx", XLSX: ".xlsx"}
MIME_TYPES = ("text/plain", "text/markdown", "text/html", "application/pdf", "text/csv", *OFFICE_SUFFIXES)
# Decoded by ragtune's codec check first, so a GBK .csv reads like a GBK .txt.
TEXT_MIME_TYPES = ("text/plain", "text/markdown", "text/csv")
SUFFIXES = ".txt, .md, .markdown, .html, .htm, .pdf, .docx, .pptx, .xlsx, .csv"
# The packages whose versions decide what the converters make of a file: a data set records them.
CONVERSION_PACKAGES = (
    "haystack-ai",
    "lxml",
    "pypdf",
    "pdfplumber",
    "pdfminer.six",
    "python-docx",
    "python-pptx",
    "openpyxl",
    "pandas",
    "tabulate",
)
# Office files are ZIP packages; a password-protected one is an OLE compound file, as old binary ones are.
_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
# Nested metadata the DOCX and XLSX converters add (document properties, sheet name): the sheet name moves
# into the text, and the rest is left out so every source keeps the flat meta the stores and filters expect.
_CONVERTER_META = ("docx", "xlsx")
# Try UTF-8, then decode with the charset charset_normalizer detects, when it is sure of it.
AUTO_ENCODING = "auto"
# charset_normalizer scores each codec that decodes the bytes by its chaos (the share of odd characters, 0 to 1), and
# merges codecs that read them the same. Another codec that scores as well as the best reads the bytes differently
# and is as plausible: Latin-1 French reads as cp775, cp1250 or cp1252 (`Le cong‚`), and only one of them is right.
# BOM-less UTF-16 and UTF-32 are left out as rivals: they decode any even run of CJK bytes, and their files carry a BOM.
_BOMLESS_WIDE = ("utf_16", "utf_32")
# A run of this many characters between ASCII bytes that decodes as UTF-8 is UTF-8 text: in a file that is not UTF-8
# as a whole, it means mixed encodings. GBK bytes decode so by chance for short runs only (the repository's Chinese
# texts in GBK: 4,676 runs, 48 of 1-3 characters, none longer).
MIXED_UTF8_RUN = 5
_NON_ASCII_RUN = re.compile(rb"[\x80-\xff]+")
_BATCH = 64
_PROGRESS_ABOVE = 200
_LISTED = 5


class CorpusError(UserError, ValueError):
    """No file of the corpus could be converted; the message gives the first reasons."""


class Conversion(NamedTuple):
    """Documents sorted by doc_id, plus doc_id -> reason for every file left out."""

    documents: list[Document]
    skipped: dict[str, str]


class _Unreadable(Exception):
    """A file that cannot become a source; the message is the reason shown to the user."""


def build_conversion_pipeline() -> Pipeline:
    """Route by MIME type, convert, join and lightly clean, so evidence quotes still match the result.

    Markdown goes through TextFileToDocument (not MarkdownToDocument) to keep the raw headings the markdown
    chunker needs; HTML and PDF become the same kind of text: HTML headings and PDF outline entries as Markdown
    headings. HTML, PDF, Word and Excel tables come out as Markdown tables, so a row keeps its cells side by side
    in a chunk; a .csv keeps its own text (one row a line under its header, and what a quote copies from it).
    The cleaner only canonicalises (NFC, CRLF -> LF, outer whitespace); it keeps blank lines, inner whitespace
    runs and repeated headers/footers because collapsing them would move paragraph breaks and delete text that
    golden quotes may cite.
    """
    pipeline = Pipeline()
    pipeline.add_component(
        "router",
        FileTypeRouter(mime_types=list(MIME_TYPES), additional_mimetypes=dict(OFFICE_SUFFIXES)),
    )
    pipeline.add_component("text_converter", TextFileToDocument())
    pipeline.add_component("html_converter", HTMLToMarkdownDocument())
    pipeline.add_component("pdf_converter", PDFToMarkdownDocument())
    pipeline.add_component("csv_converter", CSVToDocument())
    pipeline.add_component("docx_converter", DOCXToDocument(table_format="markdown"))
    pipeline.add_component("pptx_converter", PPTXToDocument())
    pipeline.add_component("xlsx_converter", XLSXToDocument(table_format="markdown"))
    pipeline.add_component("joiner", DocumentJoiner(join_mode="concatenate", sort_by_score=False))
    pipeline.add_component(
        "cleaner",
        DocumentCleaner(
            remove_empty_lines=False,
            remove_extra_whitespaces=False,
            remove_repeated_substrings=False,
            unicode_normalization="NFC",
            replace_regexes={r"\r\n?": "\n"},
            strip_whitespaces=True,
            min_content_length=1,
        ),
    )
    converters = {
        "text/plain": "text_converter",
        "text/markdown": "text_converter",
        "text/html": "html_converter",
        "application/pdf": "pdf_converter",
        "text/csv": "csv_converter",
        DOCX: "docx_converter",
        PPTX: "pptx_converter",
        XLSX: "xlsx_converter",
    }
    for mime_type, converter in converters.items():
        pipeline.connect(f"router.{mime_type}", f"{converter}.sources")
    for converter in dict.fromkeys(converters.values()):
        pipeline.connect(f"{converter}.documents", "joiner.documents")
    pipeline.connect("joiner.documents", "cleaner.documents")
    return pipeline


def convert_files(
    root: Path,
    paths: Sequence[Path],
    extra_meta: Mapping[str, Mapping[str, Any]] | None = None,
    *,
    encoding: str = AUTO_ENCODING,
) -> Conversion:
    """Convert files under `root` into canonical Documents with `id == meta["doc_id"]`, sorted by doc_id.

    `doc_id` is the path relative to `root` with POSIX separators, so ids are the same on every OS.
    `extra_meta` maps a doc_id to metadata merged into that document (tenant, acl, ...). `encoding` applies
    to .txt/.md/.csv files, and to an HTML file neither in UTF-8 nor in a charset it declares: "auto" or a Python
    codec name (PDF and Office files have none). A file it decoded other than as UTF-8 records its codec in
    `meta["encoding"]`. An empty result is an error.
    """
    root = Path(root)
    extra_meta = extra_meta or {}
    doc_ids = []
    for path in paths:
        try:
            doc_ids.append(Path(path).relative_to(root).as_posix())
        except ValueError:
            raise ValueError(f"{path}: file is not inside the corpus root {root}") from None
    if len(set(doc_ids)) != len(doc_ids):
        raise ValueError(f"{root}: the same file is listed more than once")

    pipeline = build_conversion_pipeline()
    converted: dict[str, Document] = {}
    skipped: dict[str, str] = {}
    with tqdm(
        total=len(paths), desc="converting files", unit="file", disable=len(paths) <= _PROGRESS_ABOVE
    ) as bar:
        for start in range(0, len(paths), _BATCH):
            batch = list(zip(paths[start : start + _BATCH], doc_ids[start : start + _BATCH], strict=True))
            sources, metas = [], []
            for path, doc_id in batch:
                try:
                    sources.append(_read_source(Path(path), encoding))
                except _Unreadable as exc:
                    skipped[doc_id] = str(exc)
                    continue
                metas.append({**extra_meta.get(doc_id, {}), "doc_id": doc_id})
            result = pipeline.run({"router": {"sources": sources, "meta": metas}}) if sources else {}
            parts: dict[str, list[Document]] = {}
            for doc in result.get("cleaner", {}).get("documents", []):
                parts.setdefault(doc.meta["doc_id"], []).append(doc)
            converted |= {doc_id: _source_document(doc_id, docs) for doc_id, docs in parts.items()}
            for source in result.get("router", {}).get("unclassified", []):
                suffix = Path(source.meta["doc_id"]).suffix or "(none)"
                skipped[source.meta["doc_id"]] = f"unsupported file type {suffix} (supported: {SUFFIXES})"
            bar.update(len(batch))

    for doc_id in set(doc_ids) - set(converted) - set(skipped):
        skipped[doc_id] = (
            "no text extracted (empty, a PDF without a text layer, or a converter error logged above)"
        )
    if not converted:
        reasons = [f"{doc_id}: {skipped[doc_id]}" for doc_id in sorted(skipped)[:_LISTED]]
        raise CorpusError(
            f"{root}: no documents could be converted from {len(paths)} file(s)"
            + "".join(f"\n  {reason}" for reason in reasons)
            + ("\n  ..." if len(skipped) > _LISTED else "")
        )
    return Conversion([converted[doc_id] for doc_id in sorted(converted)], dict(sorted(skipped.items())))


def _source_document(doc_id: str, parts: Sequence[Document]) -> Document:
    """The one canonical Document of a file. XLSXToDocument makes one Document per sheet: they are joined in
    workbook order, each table under a `## <sheet name>` heading, so ingest=markdown keeps a sheet together
    and a chunk says which sheet it comes from."""
    meta = {key: value for key, value in parts[0].meta.items() if key not in _CONVERTER_META}
    if "xlsx" not in parts[0].meta:
        return Document(id=doc_id, content=parts[0].content, meta=meta)
    sheets = [f"## {part.meta['xlsx']['sheet_name']}\n\n{part.content}" for part in parts]
    return Document(id=doc_id, content="\n\n".join(sheets), meta=meta)


def _read_source(path: Path, encoding: str) -> ByteStream:
    """The file's bytes for the router; a text file, or an HTML page without a charset that decodes it, must decode
    (a codec other than UTF-8 goes in meta), and an Office file must be a readable package: the converters would
    only log why they dropped it."""
    try:
        stream = ByteStream.from_file_path(path, meta={"file_path": str(path)}, guess_mime_type=True)
    except OSError as exc:
        raise _Unreadable(f"cannot be read ({exc.strerror or exc})") from None
    if stream.mime_type in TEXT_MIME_TYPES:
        codec = _text_codec(stream.data, encoding)
        if codec != "utf-8":
            stream.meta["encoding"] = codec
    elif stream.mime_type == "text/html" and html_codec(stream.data) is None:
        # Neither UTF-8 nor in a charset it declares: decoded as a text file is, and handed on as UTF-8.
        codec = _text_codec(stream.data, encoding)
        stream = ByteStream(
            stream.data.decode(codec).encode("utf-8"), {**stream.meta, "encoding": codec}, "text/html"
        )
    elif stream.mime_type in OFFICE_SUFFIXES:
        _check_package(stream.data, OFFICE_SUFFIXES[stream.mime_type])
    return stream


def _check_package(data: bytes, suffix: str) -> None:
    """Raises _Unreadable when `data` is not an Office Open XML package (a ZIP whose entries list)."""
    if data.startswith(_OLE_MAGIC):
        raise _Unreadable(
            f"not a readable {suffix} file: it is password-protected (encrypted), or an old binary Office "
            f"file renamed to {suffix}; save it without a password in the {suffix} format"
        )
    try:
        zipfile.ZipFile(io.BytesIO(data)).close()
    except zipfile.BadZipFile as exc:
        raise _Unreadable(f"not a readable {suffix} file (damaged or not a ZIP package: {exc})") from None


def _text_codec(data: bytes, encoding: str) -> str:
    """The name of the codec that decodes `data`: `encoding`, or under "auto" UTF-8, else the detected one when the
    detection is confident (a wrong guess turns the text into mojibake that then reads as content).

    Raises _Unreadable naming the first bad byte when the data does not decode, or why the detection is not trusted.
    """
    if encoding != AUTO_ENCODING:
        return _decoding(data, encoding)
    try:
        return _decoding(data, "utf-8")
    except _Unreadable as not_utf8:
        matches = list(charset_normalizer.from_bytes(data))
        if not matches:
            raise _Unreadable(f"{not_utf8}, and no other encoding was detected") from None
        best = matches[0]
        hint = "set dataset.encoding to the file's codec (e.g. latin-1, cp1252, gbk) to read it"
        rivals = [m.encoding for m in matches[1:]
                  if m.chaos <= best.chaos and not (m.encoding.startswith(_BOMLESS_WIDE) and not m.bom)]
        if rivals:
            raise _Unreadable(
                f"{not_utf8}, and its encoding is uncertain: it reads as {best.encoding} but also, differently, as "
                f"{', '.join(rivals[:3])}; {hint}"
            ) from None
        utf8_run = _utf8_run(data) if not best.bom else None
        if utf8_run is not None:
            raise _Unreadable(
                f"{not_utf8}, yet bytes {utf8_run.start()}-{utf8_run.end() - 1} are UTF-8: mixed encodings, which "
                f"{best.encoding} would turn into wrong characters; re-save the file as UTF-8, or {hint}"
            ) from None
        return _decoding(data, best.encoding)


def _utf8_run(data: bytes) -> re.Match[bytes] | None:
    """The first run of non-ASCII bytes that is UTF-8 text of at least MIXED_UTF8_RUN characters."""
    for run in _NON_ASCII_RUN.finditer(data):
        try:
            if len(run.group().decode("utf-8")) >= MIXED_UTF8_RUN:
                return run
        except UnicodeDecodeError:
            continue
    return None


def _decoding(data: bytes, encoding: str) -> str:
    """`encoding`'s canonical name once `data` is known to decode with it."""
    name = codecs.lookup(encoding).name
    try:
        data.decode(name)
    except UnicodeDecodeError as exc:
        raise _Unreadable(
            f"not {name} text ({exc.reason}: byte 0x{data[exc.start]:02x} at offset {exc.start})"
        ) from None
    return name
