import re

import pytest
from haystack import Document, Pipeline
from haystack.components.preprocessors import MarkdownHeaderSplitter, RecursiveDocumentSplitter

from components.preprocessors.chunk_span_locator import ChunkSpanLocator
from components.preprocessors.heading_prefixer import HeadingPrefixer

# The separator list recommended for CJK + English with RecursiveDocumentSplitter. Haystack 3.4.1 re.escape()s
# every separator, so they are literal strings (not regexes) and each stays at the end of the piece before it.
CJK_EN_SEPARATORS = ["\n\n", "\n", "。", "！", "？", "；", ". ", "! ", "? ", "; ", "，", "、", ", ", " "]
# The stock fixed-window recipe: a separator that never occurs sends RecursiveDocumentSplitter to its fixed
# character fallback, and its char overlap then gives windows of split_length with step split_length - overlap.
NEVER_MATCHES = "\x00"
SPLITTER_KEYS = {"_split_overlap", "split_idx_start", "source_id", "parent_id", "split_id", "page_number"}
HEADER_KEYS = {"header", "parent_headers"}

MARKDOWN = """Preamble before any heading: this guide covers installation and usage of the ragtune demo corpus.

# Ragtune Guide

Ragtune evaluates retrieval-augmented generation pipelines from configuration. Every run is tracked in MLflow. \
Experiments are declared in Hydra YAML files! Does it support Chinese? Yes; it does.

## 安装说明

在开始之前，请确认已经安装了 Python 3.11 以及所有依赖项。安装过程非常简单！只需要运行一条命令即可完成全部配置。\
如果遇到网络问题，请检查代理设置；或者使用离线镜像。你准备好了吗？那我们开始吧。

这是一段没有任何标点符号的很长很长的中文文本用于测试当分隔符全部失效时拆分器是否会退回到固定字符长度的切分方式并且保证\
每一个字符都被某个片段覆盖而不会丢失任何内容这一点对于检索评估来说非常重要因为证据片段的位置必须精确\
否则黄金标准中的引用就无法与检索结果对齐评估指标也就失去了意义

### 配置

配置文件位于 conf 目录下，默认列表在 config.yaml 中定义。每个组件都可以通过 _target_ 指定。

## Usage

Run a single experiment with the runner. Results go to metrics.json and to MLflow; the compare tool prints a table.
Short line.
Another short line with mixed 中文 and English words, ending here.

# 附录

最后一节。内容很短。
"""


def heading_path_at(text: str, pos: int) -> list[str]:
    """The ATX heading stack in force at `pos` (a heading starting exactly at `pos` counts)."""
    stack: list[str] = []
    for match in re.finditer(r"(?m)^(#{1,6}) (.+)$", text):
        if match.start() > pos:
            break
        level = len(match.group(1))
        stack = stack[: level - 1] + [match.group(2).strip()]
    return stack


def assert_spans_cover_source(chunks: list[Document], sources: list[Document]) -> None:
    """Every chunk is the exact source slice its span names, and together they leave out only whitespace."""
    by_id = {source.id: source.content for source in sources}
    covered = {source.id: bytearray(len(source.content)) for source in sources}
    for chunk in chunks:
        doc_id = chunk.meta["doc_id"]
        start, end = chunk.meta["span"]
        assert by_id[doc_id][start:end] == chunk.content
        assert chunk.id == f"{doc_id}#{start}-{end}"
        covered[doc_id][start:end] = b"\x01" * (end - start)
    for doc_id, text in by_id.items():
        lost = [ch for ch, hit in zip(text, covered[doc_id], strict=True) if not hit]
        assert "".join(lost).strip() == "", f"{doc_id} lost text {''.join(lost)!r}"


def assert_clean_meta(chunk: Document, source: Document) -> None:
    assert not (SPLITTER_KEYS | HEADER_KEYS) & chunk.meta.keys()
    for key, value in source.meta.items():
        assert chunk.meta[key] == value


@pytest.fixture
def sources() -> list[Document]:
    meta = {"doc_id": "guide.md", "tenant": "acme", "acl": ["team-a"], "title": "Guide"}
    other = {"doc_id": "notes.txt", "tenant": "beta", "acl": []}
    return [
        Document(id="guide.md", content=MARKDOWN, meta=meta),
        Document(id="notes.txt", content="第一句。第二句！Third sentence. Fourth? " * 12, meta=other),
    ]


def test_recursive_splitter_spans_ids_and_meta(sources):
    splitter = RecursiveDocumentSplitter(
        split_unit="char", split_length=120, split_overlap=20, separators=CJK_EN_SEPARATORS
    )
    chunks = splitter.run(sources)["documents"]
    # RecursiveDocumentSplitter copies the source meta (doc_id, tenant, acl) into every chunk
    assert all(chunk.meta["tenant"] in ("acme", "beta") for chunk in chunks)

    located = ChunkSpanLocator().run(chunks=chunks, sources=sources)["documents"]

    assert len(located) == len(chunks)
    assert_spans_cover_source(located, sources)
    source_by_id = {source.id: source for source in sources}
    for chunk in located:
        assert chunk.meta["heading_path"] == []
        assert_clean_meta(chunk, source_by_id[chunk.meta["doc_id"]])
    spans = [chunk.meta["span"] for chunk in located if chunk.meta["doc_id"] == "notes.txt"]
    assert any(nxt[0] < prev[1] for prev, nxt in zip(spans, spans[1:], strict=False)), (
        "expected overlapping chunks"
    )


def test_fixed_window_recipe_gives_exact_char_windows(sources):
    length, overlap = 50, 12
    splitter = RecursiveDocumentSplitter(
        split_unit="char", split_length=length, split_overlap=overlap, separators=[NEVER_MATCHES]
    )
    located = ChunkSpanLocator().run(chunks=splitter.run(sources)["documents"], sources=sources)["documents"]

    assert_spans_cover_source(located, sources)
    for source in sources:
        spans = [chunk.meta["span"] for chunk in located if chunk.meta["doc_id"] == source.id]
        size = len(source.content)
        expected = [
            [start, min(start + length, size)] for start in range(0, size - overlap, length - overlap)
        ]
        assert spans == expected


def test_markdown_chain_in_pipeline(sources):
    pipeline = Pipeline()
    pipeline.add_component("sections", MarkdownHeaderSplitter(keep_headers=True))
    pipeline.add_component(
        "splitter",
        RecursiveDocumentSplitter(
            split_unit="char", split_length=120, split_overlap=20, separators=CJK_EN_SEPARATORS
        ),
    )
    pipeline.add_component("locator", ChunkSpanLocator())
    pipeline.add_component("prefixer", HeadingPrefixer())
    pipeline.connect("sections.documents", "splitter.documents")
    pipeline.connect("splitter.documents", "locator.chunks")
    pipeline.connect("locator.documents", "prefixer.documents")

    result = pipeline.run(
        {"sections": {"documents": sources}, "locator": {"sources": sources}},
        include_outputs_from={"locator"},
    )
    located = result["locator"]["documents"]
    prefixed = result["prefixer"]["documents"]

    assert_spans_cover_source(located, sources)
    text = {source.id: source.content for source in sources}
    source_by_id = {source.id: source for source in sources}
    for chunk in located:
        start, _ = chunk.meta["span"]
        assert chunk.meta["heading_path"] == heading_path_at(text[chunk.meta["doc_id"]], start)
        assert_clean_meta(chunk, source_by_id[chunk.meta["doc_id"]])
    # the recursive splitter's split_idx_start is relative to the section: the locator must not trust it blindly
    assert any(chunk.meta["span"][0] > 0 and chunk.meta["heading_path"] for chunk in located)

    paths = {tuple(chunk.meta["heading_path"]) for chunk in located}
    assert {(), ("Ragtune Guide", "安装说明", "配置"), ("附录",)} <= paths

    assert [chunk.id for chunk in prefixed] == [chunk.id for chunk in located]
    for raw, out in zip(located, prefixed, strict=True):
        assert out.meta["span"] == raw.meta["span"]
        path = raw.meta["heading_path"]
        if path and not raw.content.lstrip().startswith("#"):
            assert out.content == " > ".join(path) + "\n" + raw.content
        else:
            assert out.content == raw.content


def test_recursive_separators_are_literal_and_stay_with_the_piece_before():
    text = "第一句。第二句。Hello there. Bye."
    regex_style = RecursiveDocumentSplitter(split_unit="char", split_length=13, separators=[r"\. "])
    literal = RecursiveDocumentSplitter(split_unit="char", split_length=13, separators=["。", ". "])

    assert "Hello there. " not in [d.content for d in regex_style.run([Document(content=text)])["documents"]]
    assert [d.content for d in literal.run([Document(content=text)])["documents"]] == [
        "第一句。第二句。",
        "Hello there. ",
        "Bye.",
    ]


def test_markdown_header_splitter_copies_source_meta(sources):
    sections = MarkdownHeaderSplitter(keep_headers=True).run(sources[:1])["documents"]
    assert all(s.meta["doc_id"] == "guide.md" and s.meta["tenant"] == "acme" for s in sections)
    assert "split_idx_start" not in sections[1].meta


def test_chunks_without_offsets_are_found_by_forward_search():
    text = "abcabcabcabc XYZ abcabc"
    source = Document(id="d", content=text, meta={"doc_id": "d"})
    windows = [(0, 6), (3, 9), (6, 12), (9, 16), (13, 23)]
    chunks = [Document(content=text[s:e], meta={"doc_id": "d"}) for s, e in windows]

    located = ChunkSpanLocator().run(chunks=chunks, sources=[source])["documents"]

    assert [tuple(chunk.meta["span"]) for chunk in located] == windows


def test_wrong_offset_falls_back_to_search():
    source = Document(id="d", content="alpha beta gamma", meta={"doc_id": "d"})
    chunk = Document(content="gamma", meta={"doc_id": "d", "split_idx_start": 0, "source_id": "d"})

    located = ChunkSpanLocator().run(chunks=[chunk], sources=[source])["documents"]

    assert located[0].meta["span"] == [11, 16]


def test_section_relative_offsets_are_shifted_by_the_learned_section_start():
    # a forward search would put "x x" at 8; the section-relative offset 6 plus the section start 4 says 10
    source = Document(id="d", content="abc\nS2: x x x x", meta={"doc_id": "d"})
    section = {"doc_id": "d", "source_id": "section-hash"}
    chunks = [
        Document(content="S2: x x", meta={**section, "split_idx_start": 0}),
        Document(content="x x", meta={**section, "split_idx_start": 6}),
    ]

    located = ChunkSpanLocator().run(chunks=chunks, sources=[source])["documents"]

    assert [chunk.meta["span"] for chunk in located] == [[4, 11], [10, 13]]


def test_heading_path_from_markdown_meta():
    source = Document(id="d", content="# A\n## B\nbody", meta={"doc_id": "d"})
    chunks = [
        Document(content="## B\nbody", meta={"doc_id": "d", "header": "B", "parent_headers": ["A"]}),
        Document(content="# A\n", meta={"doc_id": "d", "header": "", "parent_headers": []}),
    ]
    located = ChunkSpanLocator().run(chunks=chunks, sources=[source])["documents"]
    assert [chunk.meta["heading_path"] for chunk in located] == [["A", "B"], []]


def test_whitespace_chunks_dropped_and_duplicates_removed():
    source = Document(id="d", content="one two", meta={"doc_id": "d"})
    chunks = [
        Document(content="one ", meta={"doc_id": "d"}),
        Document(content="one ", meta={"doc_id": "d"}),
        Document(content="  \n", meta={"doc_id": "d"}),
        Document(content="two", meta={"doc_id": "d"}),
    ]
    located = ChunkSpanLocator().run(chunks=chunks, sources=[source])["documents"]
    assert [chunk.id for chunk in located] == ["d#0-4", "d#4-7"]


def test_rewritten_text_raises_naming_doc_and_chunk():
    source = Document(id="doc-7", content="Hello world.", meta={"doc_id": "doc-7"})
    chunk = Document(content="Hello  world. " + "x" * 100, meta={"doc_id": "doc-7"})
    with pytest.raises(ValueError, match=r"doc-7.*Hello  world\. x+'.*must not rewrite text") as error:
        ChunkSpanLocator().run(chunks=[chunk], sources=[source])
    assert "x" * 50 not in str(error.value)


def test_missing_doc_id_or_source_raises():
    source = Document(id="d", content="text", meta={"doc_id": "d"})
    with pytest.raises(ValueError, match="chunks: .*doc_id"):
        ChunkSpanLocator().run(chunks=[Document(content="text")], sources=[source])
    with pytest.raises(ValueError, match="sources: .*'other'"):
        ChunkSpanLocator().run(chunks=[Document(content="text", meta={"doc_id": "other"})], sources=[source])


def test_large_repetitive_corpus_is_located_exactly():
    # 10k docs plus one periodic 500k-char doc with 5k chunks: splitter offsets disambiguate the repeats.
    docs = [
        Document(id=f"d{i}", content=f"doc {i} " + "词语 words " * 30, meta={"doc_id": f"d{i}"})
        for i in range(10_000)
    ]
    big_text = "重复的文本 repeated text. " * 25_000
    docs.append(Document(id="big", content=big_text, meta={"doc_id": "big"}))
    chunks = [Document(content=doc.content[130:280], meta={"doc_id": doc.id}) for doc in docs[:-1]]
    chunks += [
        Document(content=big_text[k : k + 120], meta={"doc_id": "big", "split_idx_start": k})
        for k in range(0, len(big_text), 100)
    ]

    located = ChunkSpanLocator().run(chunks=chunks, sources=docs)["documents"]

    assert len(located) == len(chunks)
    assert [d.meta["span"][0] for d in located if d.meta["doc_id"] == "big"] == list(range(0, len(big_text), 100))


def test_serialization_round_trip():
    data = ChunkSpanLocator().to_dict()
    assert data == {"type": "components.preprocessors.chunk_span_locator.ChunkSpanLocator", "init_parameters": {}}
    assert isinstance(ChunkSpanLocator.from_dict(data), ChunkSpanLocator)


def test_a_chunk_inside_the_previous_one_is_dropped():
    source = Document(id="d", content="First sentence here. Second one.", meta={"doc_id": "d"})
    chunks = [
        Document(content="First sentence here. Second one.", meta={"doc_id": "d"}),
        Document(content="Second one.", meta={"doc_id": "d"}),
    ]
    out = ChunkSpanLocator().run(chunks=chunks, sources=[source])["documents"]
    assert [d.meta["span"] for d in out] == [[0, 32]]


def test_source_fields_named_like_splitter_keys_are_kept():
    meta = {"doc_id": "d", "header": "Quarterly report", "page_number": 7, "tenant": "t1"}
    source = Document(id="d", content="Alpha beta gamma.", meta=meta)
    chunk = Document(content="beta gamma.", meta={**meta, "split_idx_start": 6, "source_id": "d", "split_id": 0})
    out = ChunkSpanLocator().run(chunks=[chunk], sources=[source])["documents"][0]
    assert out.meta == {**meta, "heading_path": [], "span": [6, 17]}
