"""Fast sanity checks of the shipped demo dataset (data/demo): corpus files and golden.jsonl.

Quotes are checked against the text the index is built from: the documents `dataset.kind=demo` loads,
converted by `pipelines.conversion` (Haystack's converters and cleaner), not a separate HTML extraction.
"""

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from experiments.datasets.demo import DEMO_DIR, load_demo
from experiments.datasets.golden.items import normalise_whitespace as normalise
from experiments.datasets.settings import DemoDataset

CORPUS_DIR = DEMO_DIR / "corpus"
GOLDEN_PATH = DEMO_DIR / "golden.jsonl"

CATEGORIES = {"fact", "numeric", "procedure", "multi_hop", "unanswerable"}
CORPUS_SUFFIXES = {".md", ".txt", ".html"}


def corpus_files() -> list[Path]:
    return sorted(p for p in CORPUS_DIR.rglob("*") if p.is_file())


def doc_id(path: Path) -> str:
    return path.relative_to(CORPUS_DIR).as_posix()


def load_golden() -> list[dict]:
    items = []
    with GOLDEN_PATH.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            assert line.strip(), f"blank line {lineno} in golden.jsonl"
            item = json.loads(line)
            assert isinstance(item, dict), f"line {lineno} is not a JSON object"
            items.append(item)
    return items


@pytest.fixture(scope="module")
def documents() -> dict[str, str]:
    """doc_id -> converted content of the documents the demo dataset indexes."""
    return {doc.id: doc.content for doc in load_demo(DemoDataset()).documents}


@pytest.fixture(scope="module")
def texts(documents) -> dict[str, str]:
    """doc_id -> converted content with whitespace normalised, as golden quotes are matched."""
    return {doc_id: normalise(content) for doc_id, content in documents.items()}


@pytest.fixture(scope="module")
def golden() -> list[dict]:
    return load_golden()


def test_corpus_files_are_utf8_lf_and_sized():
    files = corpus_files()
    assert files, "empty demo corpus"
    for path in files:
        assert path.suffix in CORPUS_SUFFIXES, path
        assert path.parent.name in {"en", "zh"}, path
        data = path.read_bytes()
        assert b"\r" not in data, f"{path} has CR line endings"
        text = data.decode("utf-8")
        assert not text.startswith("\ufeff"), f"{path} has a BOM"
        assert 1500 <= len(text) <= 4000, f"{path}: {len(text)} characters"
    suffixes = Counter(p.suffix for p in files)
    assert suffixes[".md"] >= 18 and suffixes[".txt"] >= 1 and suffixes[".html"] >= 1, suffixes


def test_markdown_docs_have_sections():
    for path in CORPUS_DIR.rglob("*.md"):
        lines = path.read_text(encoding="utf-8").splitlines()
        assert lines[0].startswith("# "), path
        assert sum(line.startswith("## ") for line in lines) >= 3, path


def test_every_corpus_file_converts_to_one_document(documents):
    assert sorted(documents) == [doc_id(path) for path in corpus_files()]
    assert all(content and content == content.strip() for content in documents.values())


def test_html_doc_converts_to_text_without_markup(documents):
    html = list(CORPUS_DIR.rglob("*.html"))
    assert html
    for path in html:
        content = documents[doc_id(path)]
        assert len(content) > 1000, path
        markup = re.search(r"</?[a-zA-Z][^>]*>|&[a-z]+;", content)
        assert not markup, f"{path}: markup left in the converted text: {markup.group()!r}"


def test_golden_fields_and_ids(golden, texts):
    ids = [item["id"] for item in golden]
    assert len(ids) == len(set(ids)), [i for i, n in Counter(ids).items() if n > 1]
    for item in golden:
        assert re.fullmatch(r"(en|zh)-\d{3}", item["id"]), item["id"]
        assert isinstance(item["question"], str) and item["question"].strip(), item["id"]
        assert item["category"] in CATEGORIES, item["id"]
        assert isinstance(item["answerable"], bool), item["id"]
        assert item["answerable"] == (item["category"] != "unanswerable"), item["id"]
        if not item["answerable"]:
            for key in ("evidence", "reference_answer", "source"):
                assert not item.get(key), f"{item['id']}: unanswerable item has {key}"
            continue
        assert isinstance(item["reference_answer"], str) and item["reference_answer"].strip(), item["id"]
        assert item["source"] in texts, f"{item['id']}: unknown source {item['source']}"
        assert item["source"].split("/")[0] == item["id"][:2], f"{item['id']}: source in the other language"
        evidence = item["evidence"]
        assert isinstance(evidence, list) and 1 <= len(evidence) <= 2, item["id"]
        assert (len(evidence) == 2) == (item["category"] == "multi_hop"), item["id"]
        for quote in evidence:
            assert isinstance(quote, str) and 20 <= len(normalise(quote)) <= 200, (item["id"], quote)


def test_evidence_occurs_verbatim_only_in_source(golden, texts):
    quotes = 0
    for item in golden:
        for quote in item.get("evidence") or []:
            quotes += 1
            q = normalise(quote)
            source = item["source"]
            assert q in texts[source], f"{item['id']}: quote not in converted {source}: {quote!r}"
            elsewhere = [d for d, text in texts.items() if d != item["source"] and q in text]
            assert not elsewhere, f"{item['id']}: quote also occurs in {elsewhere}"
    assert quotes >= 40, quotes


def test_golden_counts(golden):
    by_lang = Counter(item["id"][:2] for item in golden)
    assert by_lang["en"] >= 22 and by_lang["zh"] >= 22, by_lang
    per = Counter((item["id"][:2], item["category"]) for item in golden)
    for lang in ("en", "zh"):
        assert per[lang, "unanswerable"] >= 3, per
        assert 2 <= per[lang, "multi_hop"] <= 3, per
