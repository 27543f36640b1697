import pytest
from haystack import Document

from components.common.sentence_units import SENTENCE_ID
from components.preprocessors.chunk_span_locator import ChunkSpanLocator
from components.preprocessors.sentence_window_splitter import SentenceWindowSplitter

EN = "# Leave\n\nAnnual leave is fifteen days a year. Ask early.  Sick leave is separate and unlimited.\n"
ZH = "# 假期\n\n员工每年有十五天带薪年假，入职满一年后开始计算。病假需要提供医院证明，最长三十天。婚假为十天，需提前两周申请。"
SOURCES = [
    Document(id="en", content=EN, meta={"doc_id": "en"}),
    Document(id="zh", content=ZH, meta={"doc_id": "zh"}),
]


def test_units_carry_the_three_window_fields_with_exact_offsets():
    units = SentenceWindowSplitter(min_chars=10).run(documents=SOURCES)["documents"]
    assert [u.content for u in units] == [
        "# Leave\n\nAnnual leave is fifteen days a year. ",
        "Ask early.  ",
        "Sick leave is separate and unlimited.\n",
        "# 假期\n\n员工每年有十五天带薪年假，入职满一年后开始计算。",
        "病假需要提供医院证明，最长三十天。",
        "婚假为十天，需提前两周申请。",
    ]
    for unit in units:
        source = EN if unit.meta["source_id"] == "en" else ZH
        start = unit.meta["split_idx_start"]
        assert source[start : start + len(unit.content)] == unit.content
        assert unit.meta[SENTENCE_ID] == unit.meta["split_id"]
    assert [u.meta[SENTENCE_ID] for u in units] == [0, 1, 2, 0, 1, 2]


def test_short_units_join_a_neighbour():
    units = SentenceWindowSplitter(min_chars=20).run(documents=SOURCES[:1])["documents"]
    assert [u.content for u in units] == [
        "# Leave\n\nAnnual leave is fifteen days a year. ",
        "Ask early.  Sick leave is separate and unlimited.\n",
    ]


def test_every_unit_locates_and_keeps_its_number_past_the_span_locator():
    units = SentenceWindowSplitter().run(documents=SOURCES)["documents"]
    chunks = ChunkSpanLocator().run(chunks=units, sources=SOURCES)["documents"]
    assert len(chunks) == len(units)
    for chunk in chunks:
        start, end = chunk.meta["span"]
        assert (EN if chunk.meta["doc_id"] == "en" else ZH)[start:end] == chunk.content
        assert SENTENCE_ID in chunk.meta and "split_id" not in chunk.meta


def test_rejects_a_negative_minimum():
    with pytest.raises(ValueError, match="min_chars"):
        SentenceWindowSplitter(min_chars=-1)


def test_to_dict_holds_every_init_parameter_and_from_dict_restores_them():
    data = SentenceWindowSplitter(min_chars=12).to_dict()
    assert data == {
        "type": "components.preprocessors.sentence_window_splitter.SentenceWindowSplitter",
        "init_parameters": {"min_chars": 12},
    }
    assert SentenceWindowSplitter.from_dict(data).to_dict() == data
