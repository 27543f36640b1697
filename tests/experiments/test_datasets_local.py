import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from haystack import Document
from omegaconf import OmegaConf

from experiments.datasets import Dataset, load_dataset
from experiments.datasets.base import DatasetError, corpus_fingerprint, golden_fingerprint
from experiments.datasets.golden.items import GoldenError, GoldenItem
from pipelines.errors import UserError

REPO = Path(__file__).resolve().parents[2]


def _write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    return path


@pytest.fixture
def local(tmp_path: Path) -> dict:
    corpus = tmp_path / "corpus"
    (corpus / "hr").mkdir(parents=True)
    (corpus / "hr" / "leave.md").write_text(
        "# Leave\n\nEmployees get 25 days of paid leave per year.\n\n## Carry-over\n\nUp to five days carry over.\n",
        encoding="utf-8",
    )
    (corpus / "it.txt").write_text(
        "Passwords expire every 90 days.\nUse the self-service portal.\n", encoding="utf-8"
    )
    (corpus / ".hidden.txt").write_text("not part of the corpus", encoding="utf-8")
    golden = _write_jsonl(
        tmp_path / "golden.jsonl",
        [
            {
                "id": "q1",
                "question": "How many leave days?",
                "evidence": ["25 days of paid   leave"],
                "relevant_doc_ids": ["hr/leave.md"],
            },
            {"id": "q2", "question": "When do passwords expire?", "evidence": ["expire every 90 days."]},
        ],
    )
    meta = _write_jsonl(tmp_path / "meta.jsonl", [{"doc_id": "hr/leave.md", "tenant": "acme", "acl": ["hr"]}])
    cfg = {
        "kind": "local",
        "name": "handbook",
        "corpus_dir": str(corpus),
        "golden": str(golden),
        "language": "auto",
    }
    return {"cfg": cfg, "corpus": corpus, "golden": golden, "meta": meta, "tmp": tmp_path}


def test_local_loads_documents_and_golden(local):
    dataset = load_dataset({**local["cfg"], "meta_file": str(local["meta"])}, local["tmp"] / "cache")
    assert isinstance(dataset, Dataset)
    assert dataset.name == "handbook"
    assert dataset.language == "en"
    assert [d.id for d in dataset.documents] == ["hr/leave.md", "it.txt"]
    leave = dataset.documents[0]
    assert leave.meta["doc_id"] == leave.id
    assert leave.meta["tenant"] == "acme" and leave.meta["acl"] == ["hr"]
    assert "tenant" not in dataset.documents[1].meta

    q1, q2 = dataset.golden
    (span,) = q1.evidence_spans[0]
    assert leave.content[span.start : span.end] == "25 days of paid leave"
    (span,) = q2.evidence_spans[0]
    assert span.doc_id == "it.txt"
    assert dataset.source["kind"] == "local" and dataset.source["documents"] == 2
    assert set(dataset.source["package_versions"]) == {
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
    }


def test_local_accepts_dictconfig_and_relative_paths(local, monkeypatch):
    first_line = local["golden"].read_text(encoding="utf-8").splitlines()[0]
    (local["tmp"] / "md_only.jsonl").write_text(first_line + "\n", encoding="utf-8")
    monkeypatch.chdir(local["tmp"])
    cfg = OmegaConf.create(
        {**local["cfg"], "corpus_dir": "corpus", "golden": "md_only.jsonl", "glob": "**/*.md"}
    )
    dataset = load_dataset(cfg, Path("cache"))
    assert [d.id for d in dataset.documents] == ["hr/leave.md"]
    assert dataset.source["corpus_dir"] == str(local["corpus"])


def test_local_golden_problems_surface(local):
    _write_jsonl(local["golden"], [{"id": "q1", "question": "?", "evidence": ["not in any document"]}])
    with pytest.raises(GoldenError, match="evidence quote not found"):
        load_dataset(local["cfg"], local["tmp"])


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"corpus_dir": "/no/such/dir"}, "dataset.corpus_dir: directory not found: /no/such/dir"),
        ({"golden": "/no/such.jsonl"}, "dataset.golden: file not found: /no/such.jsonl"),
        ({"golden": "???"}, "dataset.golden: required for dataset.kind='local'"),
        ({"corpus_dir": None}, "dataset.corpus_dir: required"),
        ({"meta_file": "/no/meta.jsonl"}, "dataset.meta_file: file not found"),
        ({"language": "fr"}, r"dataset.language: Invalid value 'fr', expected one of \[auto, en, zh, mixed\]"),
        ({"glob": "**/*.rst"}, r"dataset.glob: '\*\*/\*.rst' matches no files"),
        ({"max_query": 3}, "dataset.max_query: unknown key for dataset.kind='local'"),
        ({"encoding": "gbkk"}, r"dataset.encoding: unknown codec 'gbkk' \(use auto or a Python codec name"),
    ],
)
def test_local_config_errors_name_the_key(local, change, message):
    with pytest.raises(DatasetError, match=message) as excinfo:
        load_dataset({**local["cfg"], **change}, local["tmp"])
    assert isinstance(excinfo.value, UserError) and isinstance(excinfo.value, ValueError)


def test_unknown_kind_names_key_and_valid_values(tmp_path):
    with pytest.raises(
        ValueError, match=r"dataset.kind: unknown kind 'nope' \(valid: demo, local, beir, halueval\)"
    ):
        load_dataset({"kind": "nope"}, tmp_path)


def test_meta_file_errors_point_at_lines(local):
    meta = local["meta"]
    base = {**local["cfg"], "meta_file": str(meta)}
    _write_jsonl(meta, [{"doc_id": "hr/leave.md"}, {"doc_id": "missing.txt", "tenant": "x"}])
    with pytest.raises(ValueError, match=rf"dataset.meta_file: 1 doc_id\(s\) .*{meta}:2: 'missing.txt'"):
        load_dataset(base, local["tmp"])
    meta.write_text('{"doc_id": "it.txt"}\n{"tenant": "x"}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=f'{meta}:2: expected an object with a string "doc_id"'):
        load_dataset(base, local["tmp"])
    meta.write_text('{"doc_id": "it.txt"}\n{"doc_id": "it.txt"}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=f"{meta}:2: duplicate doc_id 'it.txt' \\(first on line 1\\)"):
        load_dataset(base, local["tmp"])


@pytest.mark.parametrize(
    ("access", "message"),
    [
        ({"tenant": ""}, '"tenant" must be a non-empty string'),
        ({"tenant": 7}, '"tenant" must be a non-empty string'),
        ({"tenant": "acme", "acl": []}, '"acl" must be a non-empty list of group names'),
        ({"tenant": "acme", "acl": "hr"}, '"acl" must be a non-empty list of group names'),
        ({"tenant": "acme", "acl": ["hr", " "]}, '"acl" must be a non-empty list of group names'),
    ],
)
def test_empty_access_values_are_refused(local, access, message):
    """Weaviate stores "" and [] as null, which the visibility filter reads as public: refused at load."""
    meta = local["meta"]
    _write_jsonl(meta, [{"doc_id": "it.txt", "tenant": "acme"}, {"doc_id": "hr/leave.md", **access}])
    with pytest.raises(ValueError, match=f"{meta}:2: {message}"):
        load_dataset({**local["cfg"], "meta_file": str(meta)}, local["tmp"])


def _gbk_corpus(tmp_path: Path) -> dict:
    corpus = tmp_path / "gbk"
    corpus.mkdir()
    (corpus / "leave.txt").write_bytes("员工年假为二十天。".encode("gbk"))
    (corpus / "it.txt").write_text("Passwords expire every 90 days.", encoding="utf-8")
    golden = _write_jsonl(
        tmp_path / "g.jsonl",
        [{"id": "z1", "question": "年假几天？", "evidence": ["年假为二十天"], "source": "leave.txt"}],
    )
    return {"kind": "local", "corpus_dir": str(corpus), "golden": str(golden), "language": "zh"}


@pytest.mark.parametrize(
    ("encoding", "codec", "non_utf8"),
    [
        ("auto", "gb18030", {"leave.txt": "gb18030"}),  # detected; the UTF-8 file stays UTF-8
        ("gbk", "gbk", {"it.txt": "gbk", "leave.txt": "gbk"}),  # forced on every text file
    ],
)
def test_gbk_corpus_file_is_decoded(tmp_path, encoding, codec, non_utf8):
    dataset = load_dataset({**_gbk_corpus(tmp_path), "encoding": encoding}, tmp_path)
    leave = next(d for d in dataset.documents if d.id == "leave.txt")
    assert leave.content == "员工年假为二十天。" and leave.meta["encoding"] == codec
    (span,) = dataset.golden[0].evidence_spans[0]
    assert leave.content[span.start : span.end] == "年假为二十天"
    assert dataset.skipped_files == {}
    assert dataset.source["encoding"] == encoding
    assert dataset.source["non_utf8_files"] == non_utf8


def test_skipped_files_are_listed_and_explain_golden_errors(tmp_path):
    cfg = {**_gbk_corpus(tmp_path), "encoding": "utf-8"}
    reason = "not utf-8 text (invalid start byte: byte 0xb9 at offset 2)"
    with pytest.raises(GoldenError) as excinfo:
        load_dataset(cfg, tmp_path)
    assert excinfo.value.problems == (
        f"{cfg['golden']}:1 (id=z1): source 'leave.txt' was skipped when the corpus was converted: {reason}",
    )
    _write_jsonl(Path(cfg["golden"]), [{"id": "p1", "question": "Passwords?", "evidence": ["every 90 days"]}])
    dataset = load_dataset(cfg, tmp_path)
    assert [d.id for d in dataset.documents] == ["it.txt"]
    assert dataset.skipped_files == {"leave.txt": reason}


def test_language_auto_detects_chinese(tmp_path):
    corpus = tmp_path / "c"
    corpus.mkdir()
    (corpus / "a.txt").write_text("员工每年享有二十五天带薪年假。", encoding="utf-8")
    golden = _write_jsonl(
        tmp_path / "g.jsonl", [{"id": "z1", "question": "年假几天？", "evidence": ["二十五天带薪年假"]}]
    )
    dataset = load_dataset({"kind": "local", "corpus_dir": str(corpus), "golden": str(golden)}, tmp_path)
    assert dataset.language == "zh"
    fixed = load_dataset(
        {"kind": "local", "corpus_dir": str(corpus), "golden": str(golden), "language": "en"}, tmp_path
    )
    assert fixed.language == "en"


# --- fingerprints -------------------------------------------------------------------------------------------


def test_fingerprints_are_stable_and_invalidate(local):
    cfg, corpus, golden = local["cfg"], local["corpus"], local["golden"]
    first = load_dataset(cfg, local["tmp"])
    again = load_dataset(cfg, local["tmp"])
    assert (first.corpus_fingerprint, first.golden_fingerprint, first.fingerprint) == (
        again.corpus_fingerprint,
        again.golden_fingerprint,
        again.fingerprint,
    )

    (corpus / "it.txt").write_text("Passwords expire every 90 days.\nUse the portal.\n", encoding="utf-8")
    content_changed = load_dataset(cfg, local["tmp"])
    assert content_changed.corpus_fingerprint != first.corpus_fingerprint
    assert content_changed.fingerprint != first.fingerprint

    meta_changed = load_dataset({**cfg, "meta_file": str(local["meta"])}, local["tmp"])
    assert meta_changed.corpus_fingerprint != content_changed.corpus_fingerprint

    rows = [json.loads(line) for line in golden.read_text(encoding="utf-8").splitlines()]
    rows[1]["question"] = "When exactly do passwords expire?"
    _write_jsonl(golden, rows)
    golden_changed = load_dataset(cfg, local["tmp"])
    assert golden_changed.corpus_fingerprint == content_changed.corpus_fingerprint
    assert golden_changed.golden_fingerprint != content_changed.golden_fingerprint
    assert golden_changed.fingerprint != content_changed.fingerprint


def test_corpus_fingerprint_ignores_order_but_not_meta():
    a = Document(id="a", content="alpha", meta={"doc_id": "a", "acl": ["x"], "tenant": "t"})
    b = Document(id="b", content="beta", meta={"doc_id": "b"})
    assert corpus_fingerprint([a, b]) == corpus_fingerprint([b, a])
    reordered_meta = Document(id="a", content="alpha", meta={"tenant": "t", "acl": ["x"], "doc_id": "a"})
    assert corpus_fingerprint([reordered_meta, b]) == corpus_fingerprint([a, b])
    other_acl = Document(id="a", content="alpha", meta={"doc_id": "a", "acl": ["y"], "tenant": "t"})
    assert corpus_fingerprint([other_acl, b]) != corpus_fingerprint([a, b])


def test_golden_fingerprint_sees_every_field():
    item = GoldenItem(id="q", question="?", reference_answer="a", relevant_doc_ids=("d",))
    assert golden_fingerprint([item]) == golden_fingerprint(
        [GoldenItem(id="q", question="?", reference_answer="a", relevant_doc_ids=("d",))]
    )
    for change in (
        {"reference_answer": "b"},
        {"relevant_doc_ids": ("e",)},
        {"extra": {"k": 1}},
        {"category": "c"},
    ):
        assert golden_fingerprint([dataclasses.replace(item, **change)]) != golden_fingerprint([item])


def test_fingerprint_is_the_same_in_another_process():
    code = (
        "from haystack import Document\n"
        "from experiments.datasets.base import corpus_fingerprint\n"
        "print(corpus_fingerprint([Document(id='b', content='二', meta={'doc_id': 'b', 'acl': ['x']}),"
        " Document(id='a', content='one', meta={'doc_id': 'a'})]))\n"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345", "HAYSTACK_TELEMETRY_ENABLED": "False"}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, check=True
    )
    here = corpus_fingerprint(
        [
            Document(id="a", content="one", meta={"doc_id": "a"}),
            Document(id="b", content="二", meta={"doc_id": "b", "acl": ["x"]}),
        ]
    )
    assert out.stdout.strip() == here


def test_unserialisable_meta_is_named():
    doc = Document(id="a", content="x", meta={"doc_id": "a", "when": object()})
    with pytest.raises(ValueError, match="document 'a': not JSON-serialisable"):
        corpus_fingerprint([doc])
