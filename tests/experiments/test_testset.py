"""`ragtune testset`: offline questions from a corpus, filtered, written as a golden set the runs load."""

import json
from pathlib import Path

import pytest
from haystack import Document

from experiments.datasets import load_dataset
from experiments.datasets.base import DatasetError
from experiments.datasets.golden.evidence import load_golden
from experiments.datasets.llm_questions import LlmQuestionWriter
from experiments.datasets.offline_questions import LOOKUP, NUMERIC, PROCEDURE, UNANSWERABLE, drafts
from experiments.datasets.testset import generate_testset, golden_lines, main
from tests.support.scripted_chat_generator import ScriptedChatGenerator

CORPUS = [
    Document(id="leave.md", content="Full-time employees accrue 20 days of paid annual leave per calendar year. "
             "Submit the leave request in the HR portal before the first day of leave.", meta={"doc_id": "leave.md"}),
    Document(id="glossary.md", content="The Service Desk is the single point of contact for IT requests.",
             meta={"doc_id": "glossary.md"}),
    Document(id="travel.md", content="员工出差住宿标准为一线城市每晚不超过600元。请在出差结束后五个工作日内提交报销单。",
             meta={"doc_id": "travel.md"}),
]


def test_templates_ask_for_the_number_the_term_and_the_instruction_in_the_sentences_language():
    made = {(d.category, d.question, d.answer) for d in drafts(CORPUS)}
    assert (NUMERIC, "Full-time employees accrue how many days of paid annual leave per calendar year?",
            "20 days") in made
    assert (NUMERIC, "员工出差住宿标准为一线城市每晚不超过多少元？", "600元") in made
    assert (LOOKUP, "What is Service Desk?", "the single point of contact for IT requests") in made
    assert (PROCEDURE, "How do I submit the leave request?",
            "Submit the leave request in the HR portal before the first day of leave") in made
    assert any(q == "如何在出差结束后五个工作日内提交报销单？" for c, q, _ in made if c == PROCEDURE)


def test_an_unanswerable_question_adds_a_qualifier_the_corpus_never_mentions():
    unanswerable = [d for d in drafts(CORPUS) if d.category == UNANSWERABLE]
    assert {d.language for d in unanswerable} == {"en", "zh"} and not any(d.answerable for d in unanswerable)
    corpus_text = " ".join(doc.content for doc in CORPUS)
    assert all(word not in corpus_text for d in unanswerable for word in ("Reykjavik", "Antarctica", "2041", "南极"))


def test_a_question_that_copies_too_much_of_its_evidence_is_dropped():
    strict = generate_testset(CORPUS, size=20, max_copied=20)
    assert strict.dropped["copies over 20 characters"] >= 2
    assert all(len(item.question) < 60 or item.category == UNANSWERABLE for item in strict.kept)


def test_the_demo_gives_a_set_of_both_languages_whose_evidence_is_located(tmp_path):
    report = generate_testset(load_dataset({"kind": "demo"}, Path(".")).documents, size=60)
    assert len(report.kept) >= 50
    answerable = [item for item in report.kept if item.answerable]
    assert all(all(item.evidence_spans) for item in answerable)
    languages = {item.question.isascii() for item in report.kept}
    assert languages == {True, False}
    unanswerable = len(report.kept) - len(answerable)
    assert 0 < unanswerable <= round(len(answerable) * 0.15 / 0.85) + 1
    path = tmp_path / "golden.jsonl"
    path.write_text("".join(golden_lines(report.kept)), encoding="utf-8")
    documents = load_dataset({"kind": "demo"}, Path(".")).documents
    assert [item.question for item in load_golden(path, documents)] == [item.question for item in report.kept]


def test_the_command_writes_a_golden_set_a_local_run_loads(tmp_path, capsys):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for doc in CORPUS:
        (corpus / doc.id).write_text(doc.content, encoding="utf-8")
    with pytest.raises(DatasetError, match=r"dataset.golden: required .* `ragtune testset dataset=local"):
        load_dataset({"kind": "local", "corpus_dir": str(corpus)}, tmp_path)
    out = tmp_path / "golden.jsonl"
    assert main(["dataset=local", f"dataset.corpus_dir={corpus}", "--out", str(out), "--size", "10"]) == 0
    assert f"wrote {out}" in capsys.readouterr().err
    dataset = load_dataset({"kind": "local", "corpus_dir": str(corpus), "golden": str(out)}, tmp_path)
    assert len(dataset.golden) >= 4


def scripted_writer(replies: list[str]) -> LlmQuestionWriter:
    return LlmQuestionWriter(ScriptedChatGenerator(reply="{}", first=replies), unanswerable_every=3)


def test_an_llm_writer_reads_its_json_replies_and_the_filters_judge_them():
    """Control flow only (scripted replies); the real model writes in test_an_llm_writes_drafts_on_the_demo."""
    good = json.dumps({"question": "How much paid annual leave do full-timers get?", "answer": "20 days",
                       "quote": "Full-time employees accrue 20 days of paid annual leave per calendar year.",
                       "category": "numeric"})
    invented = json.dumps({"question": "How long is paid annual leave?", "answer": "25 days",
                           "quote": "Employees get 25 days of paid annual leave.", "category": "numeric"})
    off_topic = json.dumps({"question": "What is the answer to this question?"})
    writer = scripted_writer([good, invented, off_topic, "not json"])
    leave = [Document(id="leave.md", content=CORPUS[0].content, meta={"doc_id": "leave.md"})] * 4
    drafted = list(writer.drafts(leave, passages=4))
    assert [d.category for d in drafted] == ["numeric", "numeric", UNANSWERABLE] and writer.failed_replies == 1
    report = generate_testset(CORPUS, size=5, drafted=drafted, generator="llm")
    assert [item.question for item in report.kept] == ["How much paid annual leave do full-timers get?"]
    assert report.dropped == {"evidence not found": 1, "question off its passage's topic": 1}
    assert report.kept[0].extra == {"x_generator": "llm"}


@pytest.mark.slow
def test_an_llm_writes_drafts_on_the_demo():
    """SmolLM2 through llama.cpp, held to the schema: every reply parses or is counted; what it writes is judged by
    the same filters (at 135M parameters it invents its quotes: report what it achieves, docs/datasets.md)."""
    from experiments.datasets.testset import llm_writer
    from experiments.runs.config import compose

    cfg = compose(["dataset=demo", "dataset.subset=en"])
    documents = load_dataset(cfg.dataset, Path(".")).documents
    writer = llm_writer(cfg.models.chat)
    writer.warm_up()
    drafted = list(writer.drafts(documents, passages=6, seed=0))
    assert len(drafted) + writer.failed_replies == 6 and drafted
    assert all(d.question and d.doc_id in {doc.meta["doc_id"] for doc in documents} for d in drafted)
    report = generate_testset(documents, size=6, drafted=drafted, generator="llm")
    assert report.drafted == len(drafted) and sum(report.dropped.values()) + len(report.kept) >= len(drafted) - 1


def test_the_command_writes_no_empty_set_and_exits_1(tmp_path, capsys):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "note.md").write_text("Hello there, and welcome.", encoding="utf-8")
    out = tmp_path / "golden.jsonl"
    assert main(["dataset=local", f"dataset.corpus_dir={corpus}", "--out", str(out)]) == 1
    assert "error: no question passed the filters" in capsys.readouterr().err and not out.exists()
