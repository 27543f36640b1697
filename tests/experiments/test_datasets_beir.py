import json
import logging
from pathlib import Path

import pytest

from experiments.datasets import DatasetError, load_dataset
from pipelines.errors import UserError

CORPUS = [
    {"_id": "d1", "title": "Aspirin", "text": "Aspirin reduces fever.", "metadata": {"url": "http://x/1"}},
    {"_id": "d2", "title": "", "text": "Ibuprofen is an NSAID."},
    {"_id": "d3", "title": "Paracetamol", "text": "Paracetamol treats pain."},
]
QUERIES = [
    {"_id": "q1", "text": "What reduces fever?", "answer": "Aspirin"},
    {"_id": "q2", "text": "What is ibuprofen?"},
    {"_id": "q3", "text": "Only judged non-relevant"},
    {"_id": "q-train", "text": "A training query"},
]
QRELS = "query-id\tcorpus-id\tscore\nq1\td1\t2\nq1\td3\t1\nq2\td2\t1\nq2\td3\t0\nq3\td1\t0\n"


def _jsonl(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")


@pytest.fixture
def beir(tmp_path: Path) -> Path:
    root = tmp_path / "scifact-mini"
    (root / "qrels").mkdir(parents=True)
    _jsonl(root / "corpus.jsonl", CORPUS)
    _jsonl(root / "queries.jsonl", QUERIES)
    (root / "qrels" / "test.tsv").write_text(QRELS, encoding="utf-8")
    (root / "qrels" / "train.tsv").write_text("q-train\td1\t1\n", encoding="utf-8")
    return root


def _cfg(root: Path, **extra) -> dict:
    return {"kind": "beir", "name": "mini", "path": str(root), "language": "auto", **extra}


def test_beir_loads_corpus_queries_and_qrels(beir, caplog):
    with caplog.at_level(logging.WARNING, logger="experiments.datasets.beir"):
        dataset = load_dataset(_cfg(beir), beir)
    docs = {d.id: d for d in dataset.documents}
    assert list(docs) == ["d1", "d2", "d3"]
    assert docs["d1"].content == "Aspirin\n\nAspirin reduces fever."
    assert docs["d1"].meta == {"doc_id": "d1", "title": "Aspirin", "metadata": {"url": "http://x/1"}}
    assert docs["d2"].content == "Ibuprofen is an NSAID." and "title" not in docs["d2"].meta

    assert [g.id for g in dataset.golden] == ["q1", "q2"]
    q1, q2 = dataset.golden
    assert q1.question == "What reduces fever?" and q1.reference_answer == "Aspirin"
    assert q1.relevant_doc_ids == ("d1", "d3")
    assert q1.extra["relevance"] == {"d1": 2, "d3": 1}
    assert q2.relevant_doc_ids == ("d2",) and q2.reference_answer is None
    assert dataset.language == "en"
    assert dataset.source["queries_dropped_without_qrels"] == 1
    assert "dropped 1 quer(y/ies) without a positive qrel" in caplog.text


def test_beir_split_max_queries_and_bare_qrels(beir):
    train = load_dataset(_cfg(beir, split="train"), beir)
    assert [g.id for g in train.golden] == ["q-train"]
    assert len(train.documents) == 3  # the whole corpus, whatever the split

    assert [g.id for g in load_dataset(_cfg(beir, max_queries=1), beir).golden] == ["q1"]

    (beir / "qrels" / "test.tsv").rename(beir / "qrels.tsv")
    (beir / "qrels.tsv").write_text(QRELS.split("\n", 1)[1], encoding="utf-8")  # no header line
    bare = load_dataset(_cfg(beir), beir)
    assert [g.id for g in bare.golden] == ["q1", "q2"]


def test_beir_fingerprint_tracks_settings(beir):
    full = load_dataset(_cfg(beir), beir)
    assert load_dataset(_cfg(beir), beir).fingerprint == full.fingerprint
    one = load_dataset(_cfg(beir, max_queries=1), beir)
    assert one.corpus_fingerprint == full.corpus_fingerprint
    assert one.fingerprint != full.fingerprint


@pytest.mark.parametrize(
    ("filename", "content", "message"),
    [
        ("corpus.jsonl", '{"_id": "d1", "text": "x"}\n{not json\n', r"corpus.jsonl:2: invalid JSON"),
        (
            "corpus.jsonl",
            '{"_id": "d1", "text": "x"}\n{"title": "t", "text": "y"}\n',
            r"corpus.jsonl:2: missing '_id'",
        ),
        (
            "corpus.jsonl",
            '{"_id": "d1", "text": "x"}\n{"_id": "d1", "text": "y"}\n',
            r"corpus.jsonl:2: duplicate _id 'd1'",
        ),
        ("queries.jsonl", '{"_id": "q1"}\n', r"queries.jsonl:1: missing 'text'"),
        ("qrels/test.tsv", "q1\td1\t1\nq2 d2 1\n", r"test.tsv:2: expected 3 tab-separated fields"),
        ("qrels/test.tsv", "q1\td1\t1\nq2\td2\thigh\n", r"test.tsv:2: score must be an integer, got 'high'"),
    ],
)
def test_beir_bad_lines_name_file_and_line(beir, filename, content, message):
    (beir / filename).write_text(content, encoding="utf-8")
    with pytest.raises(DatasetError, match=message):
        load_dataset(_cfg(beir), beir)


@pytest.mark.parametrize("filename", ["corpus.jsonl", "queries.jsonl", "qrels/test.tsv"])
def test_beir_bad_byte_names_file_and_line(beir, filename):
    lines = (beir / filename).read_bytes().splitlines(keepends=True)
    lines[2] = lines[2][:5] + b"\xff" + lines[2][5:]
    (beir / filename).write_bytes(b"".join(lines))
    with pytest.raises(DatasetError) as excinfo:
        load_dataset(_cfg(beir), beir)
    assert isinstance(excinfo.value, UserError)
    bad_byte = "invalid start byte: byte 0xff at column 6"
    assert str(excinfo.value) == f"{beir / filename}:3: not UTF-8 text ({bad_byte})"


def test_beir_utf8_bom_is_accepted(beir):
    (beir / "corpus.jsonl").write_bytes(b"\xef\xbb\xbf" + (beir / "corpus.jsonl").read_bytes())
    assert [d.id for d in load_dataset(_cfg(beir), beir).documents] == ["d1", "d2", "d3"]


def test_beir_unknown_ids_are_errors(beir):
    (beir / "qrels" / "test.tsv").write_text("q1\td1\t1\nq1\td9\t1\nq2\td8\t1\n", encoding="utf-8")
    with pytest.raises(
        ValueError, match=r"2 qrel\(s\) name doc ids missing from corpus.jsonl, e.g. .*test.tsv:2: 'd9'"
    ):
        load_dataset(_cfg(beir), beir)
    (beir / "qrels" / "test.tsv").write_text("q1\td1\t1\nq404\td2\t1\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"1 query id\(s\) missing from .*queries.jsonl, e.g. q404"):
        load_dataset(_cfg(beir), beir)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            {"split": "dev"},
            r"dataset.split: no qrels for split 'dev': looked for .*qrels/dev.tsv and .*qrels.tsv",
        ),
        ({"max_queries": 0}, r"dataset.max_queries: must be an integer >= 1 or null, got 0"),
        ({"max_queries": "five"}, r"dataset.max_queries: Value 'five' of type 'str' could not be converted to Integer"),
        ({"path": "/nope"}, r"dataset.path: directory not found: /nope"),
    ],
)
def test_beir_config_errors(beir, extra, message):
    with pytest.raises(ValueError, match=message):
        load_dataset(_cfg(beir, **extra), beir)


def test_beir_missing_file_names_key(beir):
    (beir / "queries.jsonl").unlink()
    with pytest.raises(ValueError, match=r"dataset.path: queries.jsonl not found in "):
        load_dataset(_cfg(beir), beir)
