"""benchmarks/answer_unit.py's leave-one-set-out choice on small hand-made tables: the best worst case relative to
each set's best single unit wins, ties go to the shipped default, and each fold chooses without its own set."""

import pytest

from benchmarks.answer_unit import SetAnswers, choose, folds, worst_relative

LABELS = ["span", "extractive", "by_type"]
# Mean answer F1 per set: span is best on a and c, the sentence on b; by_type is close to the best everywhere.
TABLE = {
    "a": {"span": 0.50, "extractive": 0.40, "by_type": 0.49},
    "b": {"span": 0.20, "extractive": 0.30, "by_type": 0.29},
    "c": {"span": 0.60, "extractive": 0.30, "by_type": 0.58},
}


def test_worst_relative_is_against_each_sets_best_single_unit():
    assert worst_relative(TABLE, "span") == pytest.approx(0.20 / 0.30 - 1)
    assert worst_relative(TABLE, "extractive") == pytest.approx(0.30 / 0.60 - 1)
    assert worst_relative(TABLE, "by_type") == pytest.approx(0.58 / 0.60 - 1)


def test_the_best_worst_case_wins_not_the_best_mean():
    assert choose(TABLE, LABELS) == "by_type"
    # span has the best mean here (0.50 against 0.44) but loses 67 % to the sentence on y; by_type loses 33 % on x
    table = {
        "x": {"span": 0.90, "extractive": 0.30, "by_type": 0.60},
        "y": {"span": 0.10, "extractive": 0.30, "by_type": 0.28},
    }
    assert max(LABELS, key=lambda label: sum(row[label] for row in table.values())) == "span"
    assert choose(table, LABELS) == "by_type"


def test_ties_go_to_the_earlier_label():
    table = {name: {**row, "by_type": row["span"]} for name, row in TABLE.items()}
    assert choose(table, LABELS) == "span"


def answers(name, span, extractive, by_type):
    return SetAnswers(
        name,
        "en",
        [f"q{i}" for i in range(len(span))],
        {"span": span, "extractive": extractive, "by_type": by_type},
        {"by_type": 0.5},
    )


def test_each_fold_chooses_on_the_other_sets_and_reports_the_change_against_span():
    sets = {
        # by_type beats both single units on a and b; on c it loses a quarter to span
        "a": answers("a", [1.0, 0.0, 0.0, 1.0], [0.0, 1.0, 1.0, 0.0], [1.0, 1.0, 1.0, 1.0]),
        "b": answers("b", [0.0, 0.0, 1.0, 1.0], [1.0, 1.0, 0.0, 0.0], [1.0, 1.0, 1.0, 0.0]),
        "c": answers("c", [1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 0.0, 1.0]),
    }
    rows = {row["held_out"]: row for row in folds(sets, LABELS)}
    assert rows["c"]["chosen"] == "by_type"  # chosen on a and b
    assert rows["c"]["f1"] == pytest.approx(0.75)
    assert rows["c"]["change"].diff == pytest.approx(-0.25)
    assert rows["c"]["relative"] == pytest.approx(-0.25)
    assert rows["a"]["chosen"] == "span"  # chosen on b and c, where by_type loses 25 % on c
    assert rows["a"]["change"].diff == 0.0
    assert rows["a"]["relative"] == pytest.approx(0.0)
