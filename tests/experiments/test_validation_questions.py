"""The hand-written question files of data/validation/ keep the rules data/validation/README.md states, checked
without building the sets (which needs their Debian packages): each one parses as a golden set, is named by a set,
has enough items of each kind, no section backs more than 3 questions, and no question copies its evidence."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from components.common.words import HAN_RUN
from experiments.datasets.doc_sets.questions import MIN_ANSWERABLE, MIN_UNANSWERABLE, QUESTIONS_DIR
from experiments.datasets.doc_sets.specs import SPECS
from experiments.datasets.golden.parsing import parse_golden_file

FILES = sorted(QUESTIONS_DIR.glob("*.jsonl"))
CATEGORIES = {"lookup", "numeric", "procedure", "comparison", "multi-hop", "unanswerable"}
MAX_PER_SECTION = 3
MAX_SHARED_HAN = 8  # consecutive Han characters a question may share with its evidence


def longest_shared_han(question: str, evidence: str) -> int:
    """The longest run of Han characters of `question` that `evidence` contains."""
    best = 0
    for run in HAN_RUN.findall(question):
        for start in range(len(run)):
            end = start + best + 1
            while end <= len(run) and run[start:end] in evidence:
                best, end = end - start, end + 1
    return best


def test_every_questions_file_is_named_by_a_set_and_every_named_file_exists():
    named = {spec.questions for spec in SPECS.values() if spec.questions}
    assert named == {path.name for path in FILES}


@pytest.mark.parametrize("path", FILES, ids=lambda path: path.stem)
def test_a_questions_file_keeps_the_rules(path: Path):
    items = [item for _, item in parse_golden_file(path)]
    assert all(item.id.startswith(f"{path.stem}-") for item in items)
    assert {item.category for item in items} <= CATEGORIES
    answerable = [item for item in items if item.answerable]
    assert len(answerable) >= MIN_ANSWERABLE and len(items) - len(answerable) >= MIN_UNANSWERABLE
    for item in answerable:
        assert item.reference_answer and item.evidence, item.id
        assert item.source or (item.category == "multi-hop" and len(item.evidence) >= 2), item.id
        assert longest_shared_han(item.question, " ".join(item.evidence)) <= MAX_SHARED_HAN, item.id
    for item in items:
        if not item.answerable:
            assert item.category == "unanswerable" and not item.evidence and item.extra.get("x_topic_doc"), (
                item.id
            )
    per_section = Counter(item.source for item in items if item.source)
    assert max(per_section.values()) <= MAX_PER_SECTION


def test_the_shared_han_count_finds_the_longest_run():
    assert longest_shared_han("软件包管理工具有哪些", "常用的软件包管理工具。") == 7  # 软件包管理工具
    assert longest_shared_han("dpkg 是什么", "dpkg 底层工具") == 0
