import pytest
from haystack import Document

from components.context.extractive_compressor import ExtractiveCompressor
from experiments.evaluation.relevance import locate

SOURCE = ("Leave policy.\nFull-time employees accrue 20 days of paid annual leave per calendar year. "
          "Part-time employees accrue leave in proportion to their contracted hours. "
          "The office kitchen is cleaned on Fridays. Parking permits are issued by facilities.")
CORPUS = {"leave": SOURCE}


def chunk(start: int, end: int, prefix: str = "") -> Document:
    return Document(id=f"leave#{start}", content=prefix + SOURCE[start:end], meta={"doc_id": "leave", "span": [start, end]})


def test_keeps_the_best_strips_in_order_with_exact_spans():
    docs = [chunk(14, len(SOURCE), prefix="Handbook > Leave\n")]
    out = ExtractiveCompressor(token_budget=25, sentences_per_strip=1).run(
        query="How many days of paid annual leave do full-time employees accrue?", documents=docs)["documents"]
    assert [d.content for d in out][0] == "Full-time employees accrue 20 days of paid annual leave per calendar year."
    assert sum(len(d.content.split()) for d in out) <= 25
    for strip in out:  # the span is exactly the strip's text in the source: the heading prefix is accounted for
        start, end = strip.meta["span"]
        assert SOURCE[start:end] == strip.content and locate(strip, CORPUS) == ("leave", start, end)
        assert strip.meta["compressed_from"] == "leave#14" and strip.meta["doc_id"] == "leave"
    assert "kitchen" not in " ".join(d.content for d in out)


def test_the_budget_cuts_and_the_kept_strips_come_out_in_context_order():
    docs = [chunk(14, len(SOURCE))]
    wide = ExtractiveCompressor(token_budget=1000, sentences_per_strip=1, min_best_score=0.0).run(
        query="leave hours employees", documents=docs)["documents"]
    assert [d.meta["span"][0] for d in wide] == sorted(d.meta["span"][0] for d in wide)
    narrow = ExtractiveCompressor(token_budget=14, sentences_per_strip=1, min_best_score=0.0).run(
        query="part-time contracted hours", documents=docs)["documents"]
    assert [d.content for d in narrow] == ["Part-time employees accrue leave in proportion to their contracted hours."]


def test_a_broad_question_keeps_the_whole_context():
    docs = [chunk(14, len(SOURCE))]
    assert ExtractiveCompressor(min_best_score=0.5).run(query="Tell me everything", documents=docs)["documents"] == docs


def test_near_duplicate_strips_across_chunks_are_dropped():
    docs = [chunk(14, 88), chunk(14, 88)]
    docs[1] = Document(id="copy", content=docs[0].content, meta={"doc_id": "leave", "span": [14, 88]})
    out = ExtractiveCompressor(token_budget=100).run(query="paid annual leave days", documents=docs)["documents"]
    assert len(out) == 1


def test_chinese_is_split_at_its_terminators_and_counted_by_character():
    text = "全职员工每年享有15天带薪年假。兼职员工按合同工时折算。办公室每周五清洁。"
    doc = Document(id="zh", content=text, meta={"doc_id": "zh", "span": [0, len(text)]})
    out = ExtractiveCompressor(token_budget=20, sentences_per_strip=1).run(query="全职员工有多少天年假？", documents=[doc])["documents"]
    assert [d.content for d in out] == ["全职员工每年享有15天带薪年假。"]
    assert out[0].meta["span"] == [0, len(out[0].content)]


def test_serialisation_is_exact_and_round_trips():
    data = ExtractiveCompressor(token_budget=80).to_dict()
    assert data == {"type": "components.context.extractive_compressor.ExtractiveCompressor",
                    "init_parameters": {"token_budget": 80, "sentences_per_strip": 2, "min_best_score": 0.2,
                                        "dedup_threshold": 0.8, "tokenizer_model": None, "keep_ratio": None}}
    assert ExtractiveCompressor.from_dict(data).to_dict() == data


def test_bad_parameters_are_refused():
    with pytest.raises(ValueError, match="token_budget"):
        ExtractiveCompressor(token_budget=0)
    with pytest.raises(ValueError, match="min_best_score"):
        ExtractiveCompressor(min_best_score=2)


def test_a_keep_ratio_keeps_only_strips_close_to_the_best_whatever_the_budget():
    chunk = Document(id="c", content="Leave is 20 days a year. Parking is free. Annual leave carries over five days.")
    compressor = ExtractiveCompressor(token_budget=None, sentences_per_strip=1, keep_ratio=0.4)
    kept = compressor.run(query="how many annual leave days", documents=[chunk])["documents"]
    assert [d.content for d in kept] == ["Leave is 20 days a year.", "Annual leave carries over five days."]
    with pytest.raises(ValueError, match="keep_ratio"):
        ExtractiveCompressor(keep_ratio=0)
