import pytest
from haystack import Document

from experiments.evaluation.grading_metrics import grading_record, grading_summary
from tests.support.records import record


def test_the_record_keeps_the_label_and_each_passages_score_and_grade():
    graded = [Document(content="a", meta={"crag_score": 0.912345, "crag_grade": "relevant"}),
              Document(content="b", meta={"crag_score": 0.5, "crag_grade": "ambiguous"})]
    assert grading_record({"label": "correct", "graded": graded}) == {
        "crag_label": "correct", "crag_scores": [0.9123, 0.5], "crag_grades": ["relevant", "ambiguous"]}


def test_label_rates_and_accuracy_against_answerability():
    records = [
        record({"answerable": True, "crag_label": "correct"}),  # right
        record({"answerable": True, "crag_label": "ambiguous"}),  # right: answerable is correct or ambiguous
        record({"answerable": True, "crag_label": "incorrect"}),  # wrong
        record({"answerable": False, "crag_label": "incorrect"}),  # right
        record({"answerable": False, "crag_label": "ambiguous"}),  # wrong
        record({"answerable": False, "crag_label": "correct", "expected_route": "no_retrieval"}),  # a greeting: not graded
    ]
    assert grading_summary(records) == pytest.approx({
        "crag/label_correct_rate": 0.2, "crag/label_ambiguous_rate": 0.4, "crag/label_incorrect_rate": 0.4,
        "crag/label_accuracy": 0.6})
    assert grading_summary([record({"answerable": True})]) == {}  # no grader: no crag metrics
