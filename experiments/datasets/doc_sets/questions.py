"""Hand-written questions: a validation set's queries come from data/validation/<file> instead of its headings,
each evidence quote located in the corpus the build writes, so a quote that no longer matches fails the build."""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from experiments.datasets.base import read_jsonl
from experiments.datasets.doc_sets.errors import DocSetError
from experiments.datasets.doc_sets.specs import DocSetSpec

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
    """The hand-written questions of `spec`, each evidence quote located in `corpus` (doc id -> text as written);
    one DocSetError naming every quote it cannot find, or too few items of a kind."""
    from haystack import Document

    from experiments.datasets.golden.evidence import load_golden
    from experiments.datasets.golden.items import GoldenError

    path = QUESTIONS_DIR / str(spec.questions)
    try:
        located = load_golden(path, [Document(id=i, content=text) for i, text in corpus.items()])
    except (GoldenError, OSError) as e:
        raise DocSetError(f"{spec.name}: {e}") from None
    answerable = sum(1 for item in located if item.answerable)
    if answerable < MIN_ANSWERABLE or len(located) - answerable < MIN_UNANSWERABLE:
        raise DocSetError(f"{path}: {answerable} answerable and {len(located) - answerable} unanswerable questions; "
                          f"a validation set needs at least {MIN_ANSWERABLE} and {MIN_UNANSWERABLE}")
    return [record for _, record in read_jsonl(path)]


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
