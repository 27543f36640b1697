"""Hand-written questions: a validation set's queries come from data/validation/<file> instead of its headings,
each evidence quote located in the corpus the build writes, so a quote that no longer matches fails the build.

A question names its section by doc id; one file serves the same pages in every corpus format, as the doc ids'
suffix (`.txt`, `.html`, `.docx`) is set to the set's own (specs.CORPUS_SUFFIXES).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from experiments.datasets.base import DatasetError, read_jsonl
from experiments.datasets.doc_sets.errors import DocSetError
from experiments.datasets.doc_sets.specs import CORPUS_SUFFIXES, DocSetSpec

QUESTIONS_DIR = Path(__file__).resolve().parents[3] / "data" / "validation"
# How the hand-written questions of data/validation/ were written, recorded in each such set's SOURCE.json.
HOW_WRITTEN = (
    "Written item by item by an LLM agent (Claude) reading this build's corpus files, before any retrieval had run "
    "on them (no index, search or model was used to choose or check them): natural questions in the corpus's "
    "language, the Chinese ones mixing in English tool, format and function names as Chinese engineers write "
    "them, sharing at most 8 consecutive Han characters (5 English words) with their evidence; each evidence "
    "quote copied verbatim from one section (two for multi-hop items); at most 3 questions per section; "
    "unanswerable questions ask for a fact the corpus lacks about a topic it covers (checked with grep)."
)
MIN_ANSWERABLE, MIN_UNANSWERABLE = 40, 5


def written_items(spec: DocSetSpec, corpus: dict[str, str]) -> list[dict[str, Any]]:
    """The hand-written questions of `spec`, their doc ids in its corpus format, each evidence quote located in
    `corpus` (doc id -> text as the product converts it); one DocSetError naming every quote it cannot find, or too
    few items of a kind."""
    from haystack import Document

    from experiments.datasets.golden.evidence import locate_evidence
    from experiments.datasets.golden.items import GoldenError
    from experiments.datasets.golden.parsing import parse_golden

    path = QUESTIONS_DIR / str(spec.questions)
    try:
        records = [_in_format(record, CORPUS_SUFFIXES[spec.corpus_format]) for _, record in read_jsonl(path)]
        items = parse_golden([json.dumps(record, ensure_ascii=False) for record in records], str(path))
        located = locate_evidence(items, [Document(id=i, content=text) for i, text in corpus.items()], str(path))
    except (GoldenError, DatasetError, OSError) as e:
        raise DocSetError(f"{spec.name}: {e}") from None
    answerable = sum(1 for item in located if item.answerable)
    if answerable < MIN_ANSWERABLE or len(located) - answerable < MIN_UNANSWERABLE:
        raise DocSetError(f"{path}: {answerable} answerable and {len(located) - answerable} unanswerable questions; "
                          f"a validation set needs at least {MIN_ANSWERABLE} and {MIN_UNANSWERABLE}")
    return records


def _in_format(record: dict[str, Any], suffix: str) -> dict[str, Any]:
    """The record with the doc ids it names (`source`, `relevant_doc_ids`, `x_topic_doc`) ending in `suffix`."""

    def retarget(doc_id: Any) -> Any:
        if not isinstance(doc_id, str) or PurePosixPath(doc_id).suffix not in CORPUS_SUFFIXES.values():
            return doc_id
        return str(PurePosixPath(doc_id).with_suffix(suffix))

    named = {key: retarget(record[key]) for key in ("source", "x_topic_doc") if key in record}
    if isinstance(record.get("relevant_doc_ids"), list):
        named["relevant_doc_ids"] = [retarget(doc_id) for doc_id in record["relevant_doc_ids"]]
    return {**record, **named}


def written_source(spec: DocSetSpec, items: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """SOURCE.json's account of the questions: their file and its SHA-256, counts, and how they were written."""
    path = QUESTIONS_DIR / str(spec.questions)
    return {
        "questions": f"data/validation/{spec.questions}",
        "questions_sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        "answerable": sum(1 for item in items if item.get("answerable", True)),
        "unanswerable": sum(1 for item in items if item.get("answerable") is False),
        "categories": dict(sorted(Counter(str(item.get("category")) for item in items).items())),
        "how_written": HOW_WRITTEN,
    }
