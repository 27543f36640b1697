import pytest

from experiments.evaluation.diagnosis import Evidence, diagnosis_markdown, first_broken_layer, layer_counts
from experiments.evaluation.relevance import Judged

FOUND = Judged(gains=(1,), n_units=1, mode="quote", ids=("a",))
MISSING = Judged(gains=(0,), n_units=1, mode="quote", ids=("a",))
GOOD = {"answer/refused": 0.0, "answer/f1": 0.9, "answer/unsupported_sentence_rate": 0.0}
WRONG = {"answer/refused": 0.0, "answer/f1": 0.1}


@pytest.mark.parametrize(
    ("evidence", "answer", "layer"),
    [
        (Evidence(FOUND, FOUND, FOUND), GOOD, "ok"),
        (Evidence(MISSING, MISSING, MISSING), WRONG, "chunking"),
        (Evidence(FOUND, MISSING, MISSING), WRONG, "retrieval"),
        (Evidence(FOUND, FOUND, MISSING), WRONG, "context"),
        (Evidence(FOUND, FOUND, FOUND), WRONG, "generation"),
        (Evidence(FOUND, FOUND, FOUND), {**GOOD, "answer/refused": 1.0}, "generation"),
        (Evidence(FOUND, FOUND, FOUND), {**GOOD, "answer/unsupported_sentence_rate": 0.5}, "generation"),
        (Evidence(None, FOUND, FOUND), WRONG, "generation"),  # no index chunks given: chunking not judged
        (Evidence(FOUND, FOUND, MISSING), None, "context"),  # retrieval-only pipeline
        (Evidence(FOUND, FOUND, FOUND), None, "ok"),
    ],
)
def test_first_broken_layer_for_answerable_questions(evidence, answer, layer):
    assert first_broken_layer(True, evidence, answer, pass_f1=0.5) == layer


def test_unanswerable_questions_pass_only_when_refused():
    nothing = Evidence(None, None, None)
    assert first_broken_layer(False, nothing, {"answer/refused": 1.0}, 0.5) == "ok"
    assert first_broken_layer(False, nothing, {"answer/refused": 0.0}, 0.5) == "should_have_refused"


@pytest.mark.parametrize(("answerable", "evidence", "answer", "grade", "layer"), [
    (True, Evidence(FOUND, FOUND, MISSING), {**WRONG, "answer/refused": 1.0}, "incorrect", "grading"),
    (True, Evidence(FOUND, MISSING, MISSING), WRONG, "incorrect", "retrieval"),  # nothing relevant to grade
    (True, Evidence(FOUND, FOUND, FOUND), GOOD, "incorrect", "ok"),  # answered well all the same
    (True, Evidence(FOUND, FOUND, MISSING), WRONG, "ambiguous", "context"),
    (False, Evidence(None, None, None), {"answer/refused": 0.0}, "correct", "grading"),
    (False, Evidence(None, None, None), {"answer/refused": 0.0}, "ambiguous", "should_have_refused"),
    (False, Evidence(None, None, None), {"answer/refused": 1.0}, "correct", "ok"),
])
def test_a_retrieval_evaluators_wrong_grade_is_the_grading_layer(answerable, evidence, answer, grade, layer):
    assert first_broken_layer(answerable, evidence, answer, 0.5, grade) == layer


def test_counts_and_markdown_name_every_layer_and_category():
    rows = [
        {"id": "q1", "category": "fact", "layer": "ok", "question": "a?", "reference": "x", "answer": "x"},
        {"id": "q2", "category": "fact", "layer": "retrieval", "question": "b | c?", "reference": "y", "answer": "z"},
        {"id": "q3", "category": "unanswerable", "layer": "should_have_refused", "question": "d?", "reference": None, "answer": "w"},
    ]
    counts = layer_counts([r["layer"] for r in rows])
    assert counts["diagnosis/ok"] == 1 and counts["diagnosis/retrieval"] == 1 and counts["diagnosis/chunking"] == 0
    text = diagnosis_markdown(rows, "naive", 0.5)
    assert "| retrieval | 1 | 33% |" in text and "| fact | 2 | 1 | 0 | 0 | 0 | 1 |" in text
    assert "**q2** (fact) b \\| c?" in text and "expected: (refusal)" in text


@pytest.mark.parametrize(("answerable", "answer", "layer"), [
    (True, WRONG, "agent"),  # charged before the evidence layers: the agent chose what to search
    (True, GOOD, "ok"),  # a good answer passes however the agent got there
    (False, {"answer/refused": 0.0}, "should_have_refused"),
])
def test_an_agent_that_failed_is_the_agent_layer(answerable, answer, layer):
    missing = Evidence(FOUND, MISSING, MISSING)
    assert first_broken_layer(answerable, missing, answer, 0.5, agent_failed=True) == layer
    assert first_broken_layer(True, missing, WRONG, 0.5, agent_failed=False) == "retrieval"


def test_the_agent_layer_says_why():
    rows = [{"id": "s1", "category": "table_lookup", "layer": "agent", "question": "Leave days?", "reference": "20",
             "answer": "I cannot answer", "agent_failure": "loop (repeated_call)"}]
    text = diagnosis_markdown(rows, "agentic", 0.5)
    assert "| agent | 1 | 100% |" in text
    assert "## agent: the agent looped" in text and "  - why: loop (repeated_call)" in text
