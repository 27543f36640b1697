import pytest
from haystack import Document
from haystack.components.preprocessors import RecursiveDocumentSplitter

from components.common.sentence_units import SENTENCE_ID
from components.preprocessors.chunk_guard import ChunkGuard, find_blocks
from components.preprocessors.chunk_span_locator import ChunkSpanLocator
from components.preprocessors.sentence_window_splitter import SentenceWindowSplitter

HEADER = "| office | days |\n|---|---:|\n"
ROWS = "".join(f"| office{i} | {10 + i} |\n" for i in range(12))
CODE = "```python\n" + "".join(f"leave_{i} = {i}\n" for i in range(9)) + "```\n"
TEXT = (
    "Annual leave depends on the office. " * 3
    + "\n\n"
    + HEADER
    + ROWS
    + "\nThe table above is updated every spring. " * 2
    + "\n\n"
    + CODE
    + "\n~~~\nnot closed, so it runs to the end\n"
)
META = {"doc_id": "d", "access": ["hr"], "title": "Leave"}
SOURCE = Document(id="d", content=TEXT, meta=META)


def located(split_length, overlap=0, sources=(SOURCE,)):
    splitter = RecursiveDocumentSplitter(
        split_length=split_length,
        split_overlap=overlap,
        split_unit="char",
        separators=["\n\n", "\n", ". ", " "],
    )
    splitter.warm_up()
    sources = list(sources)
    chunks = splitter.run(
        [Document(id=s.id, content=s.content, meta={**s.meta, "doc_id": s.id}) for s in sources]
    )
    return ChunkSpanLocator().run(chunks=chunks["documents"], sources=sources)["documents"]


def guarded(chunks, sources=(SOURCE,), **params):
    return ChunkGuard(**params).run(documents=chunks, sources=list(sources))["documents"]


def cuts(chunks, blocks):
    """Blocks that some chunk holds only part of."""
    return [
        b
        for b in blocks
        for c in chunks
        if c.meta["span"][0] < b.end
        and b.start < c.meta["span"][1]
        and not c.meta["span"][0] <= b.start < b.end <= c.meta["span"][1]
    ]


def assert_exact(chunks, text=TEXT):
    for chunk in chunks:
        start, end = chunk.meta["span"]
        assert chunk.content == text[start:end]
        assert chunk.id == f"{chunk.meta['doc_id']}#{start}-{end}"


def test_finds_fenced_code_tables_and_an_unclosed_fence():
    blocks = find_blocks(TEXT)
    assert [TEXT[b.start : b.end] for b in blocks] == [
        (HEADER + ROWS).rstrip("\n"),
        CODE.rstrip("\n"),
        TEXT[TEXT.index("~~~") :].rstrip("\n"),
    ]
    assert [b.header for b in blocks] == [HEADER, "", ""]
    text = "    | indented 4 spaces: code, not a table\n```\n| in code |\n```"
    assert [text[b.start : b.end] for b in find_blocks(text)] == ["```\n| in code |\n```"]


def test_a_block_across_a_boundary_is_merged_with_the_chunks_after_it():
    chunks = located(120)
    blocks = find_blocks(TEXT)
    assert cuts(chunks, blocks)
    out = guarded(chunks, chunk_size=120)
    assert not cuts(out, blocks)
    assert_exact(out)
    assert "".join(c.content for c in out) == TEXT  # contiguous chunks: nothing lost or doubled
    assert all(c.meta["access"] == ["hr"] and c.meta["title"] == "Leave" for c in out)


def test_overlapping_chunks_merge_into_their_union_once():
    chunks = located(120, overlap=30)
    out = guarded(chunks, chunk_size=120)
    assert not cuts(out, find_blocks(TEXT))
    assert_exact(out)
    covered = set().union(*(range(*c.meta["span"]) for c in chunks))
    assert covered == set().union(*(range(*c.meta["span"]) for c in out))
    merged = [c for c in out if c.id not in {chunk.id for chunk in chunks}]
    assert merged and all(TEXT.count(c.content) == 1 for c in merged)


def test_chunks_that_cut_nothing_pass_untouched():
    chunks = located(1000)[:1]
    assert guarded(chunks, chunk_size=1000)[0] is chunks[0]


def test_an_oversize_table_is_cut_between_rows_with_its_header_on_each_piece():
    chunks = located(60)
    out = guarded(chunks, chunk_size=60)  # the table is over 3 x 60 characters
    table = find_blocks(TEXT)[0]
    pieces = [c for c in out if table.start <= c.meta["span"][0] and c.meta["span"][1] <= table.end]
    assert len(pieces) > 3
    assert pieces[0].content.startswith(HEADER) and pieces[0].content == TEXT[slice(*pieces[0].meta["span"])]
    for piece in pieces[1:]:
        start, end = piece.meta["span"]
        assert piece.content == HEADER + TEXT[start:end]
        assert TEXT[start - 1] == "\n" and TEXT[start] == "|" and (TEXT[end - 1] == "\n" or end == table.end)
        assert len(piece.content) <= 60
    assert "".join(TEXT[slice(*p.meta["span"])] for p in pieces) == TEXT[table.start : table.end]
    assert all(p.meta["access"] == ["hr"] for p in pieces)
    code = find_blocks(TEXT)[1]
    assert not cuts(out, [code])


LEAD = "Leave per office, as agreed in 2023 and reviewed every year by HR:\n"
TAIL = "Offices not listed get the company default of ten days.\nAsk HR for anything else.\n"


def test_no_merge_passes_max_chars_and_the_block_stays_whole_in_a_chunk_of_its_own():
    """The chunk cutting the table's last row reaches 57 characters past it: their union would pass 3 x 80."""
    text = LEAD + HEADER + ROWS + TAIL
    source = Document(id="t", content=text, meta={"access": ["hr"]})
    chunks = located(80, sources=(source,))
    (table,) = find_blocks(text)
    assert cuts(chunks, [table]) and table.end - table.start <= 3 * 80
    out = guarded(chunks, sources=(source,), chunk_size=80)
    assert all(c.meta["span"][1] - c.meta["span"][0] <= 3 * 80 for c in out)
    assert not cuts(out, [table]) and [table.start, table.end] in [c.meta["span"] for c in out]
    assert_exact(out, text)
    assert "".join(c.content for c in out) == text
    assert out[0] is chunks[0] and all(c.meta["access"] == ["hr"] for c in out)
    assert guarded(chunks, sources=(source,), chunk_size=80, max_chars=400) == guarded(
        chunks, sources=(source,), chunk_size=400
    )


def test_max_chars_cuts_a_block_longer_than_it_between_lines():
    text = LEAD + HEADER + ROWS + TAIL
    source = Document(id="t", content=text, meta={})
    out = guarded(located(80, sources=(source,)), sources=(source,), chunk_size=80, max_chars=200)
    (table,) = find_blocks(text)
    assert all(len(c.content) <= 200 for c in out) and not [
        c for c in out if c.meta["span"] == [table.start, table.end]
    ]
    for chunk in out:
        start, end = chunk.meta["span"]
        assert start in (0, table.end) or text[start - 1] == "\n"  # every cut falls between lines
        assert end in (len(text), table.end) or text[end - 1] == "\n"


def by_paragraph(*sources):
    pieces = [
        Document(content=part, meta={**source.meta, "doc_id": source.id})
        for source in sources
        for part in source.content.split("\n\n")
    ]
    return ChunkSpanLocator().run(chunks=pieces, sources=list(sources))["documents"]


def test_a_short_chunk_joins_the_next_and_a_short_last_one_the_one_before():
    other = Document(id="e", content="Tiny.\n\nA paragraph long enough on its own.\n\nEnd.", meta={})
    out = guarded(by_paragraph(other), sources=(other,), min_chars=12)
    assert [c.content for c in out] == ["Tiny.\n\nA paragraph long enough on its own.\n\nEnd."]
    out = guarded(by_paragraph(other), sources=(other,), min_chars=5)
    assert [c.content for c in out] == ["Tiny.", "A paragraph long enough on its own.\n\nEnd."]
    assert_exact(out, other.content)


def test_a_short_chunk_joins_the_one_before_when_the_next_would_pass_max_chars_else_stays_short():
    long = "A paragraph long enough on its own, and long enough that nothing joins it."
    other = Document(id="e", content=f"Opening words of it.\n\nTiny.\n\n{long}", meta={})
    out = guarded(
        by_paragraph(other), sources=(other,), min_chars=12, chunk_size=len(long), max_chars=len(long) + 5
    )
    assert [c.content for c in out] == ["Opening words of it.\n\nTiny.", long]
    alone = Document(id="f", content=f"Tiny.\n\n{long}", meta={})
    out = guarded(by_paragraph(alone), sources=(alone,), min_chars=12, chunk_size=len(long))
    assert [c.content for c in out] == [alone.content]  # 3 x chunk_size holds both ...
    out = guarded(
        by_paragraph(alone), sources=(alone,), min_chars=12, chunk_size=len(long), max_chars=len(long)
    )
    assert [c.content for c in out] == ["Tiny.", long]  # ... max_chars does not, and there is none before


def test_short_chunks_never_join_another_document():
    first = Document(id="a", content="One.", meta={"access": ["a"]})
    second = Document(
        id="b", content="Two.\n\nThe second document's own long paragraph.", meta={"access": ["b"]}
    )
    out = guarded(by_paragraph(first, second), sources=(first, second), min_chars=12)
    assert [(c.meta["doc_id"], c.content) for c in out] == [
        ("a", "One."),
        ("b", "Two.\n\nThe second document's own long paragraph."),
    ]
    assert [c.meta["access"] for c in out] == [["a"], ["b"]]


def test_sentence_ids_are_renumbered_after_merging():
    units = SentenceWindowSplitter(min_chars=20).run(documents=[Document(id="d", content=TEXT, meta=META)])
    chunks = ChunkSpanLocator().run(chunks=units["documents"], sources=[SOURCE])["documents"]
    out = guarded(chunks, min_chars=20, chunk_size=500)
    assert len(out) < len(chunks)
    assert [c.meta[SENTENCE_ID] for c in out] == list(range(len(out)))
    assert "".join(c.content for c in out) == TEXT
    assert not cuts(out, find_blocks(TEXT))


def test_a_missing_source_is_named():
    with pytest.raises(ValueError, match="'d'"):
        ChunkGuard().run(documents=located(500), sources=[])


@pytest.mark.parametrize(
    ("params", "name"),
    [({"min_chars": -1}, "min_chars"), ({"chunk_size": 0}, "chunk_size"), ({"max_chars": 499}, "max_chars")],
)
def test_rejects_bad_sizes(params, name):
    with pytest.raises(ValueError, match=name):
        ChunkGuard(**params)


def test_to_dict_holds_every_init_parameter_and_from_dict_restores_them():
    data = ChunkGuard(min_chars=40, chunk_size=300, max_chars=700).to_dict()
    assert data == {
        "type": "components.preprocessors.chunk_guard.ChunkGuard",
        "init_parameters": {"min_chars": 40, "chunk_size": 300, "max_chars": 700},
    }
    assert ChunkGuard.from_dict(data).to_dict() == data
