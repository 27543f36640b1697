import pytest

from components.common.sentence_units import sentence_units
from components.common.sentences import (
    content_terms,
    parse_citations,
    split_sentences,
    strip_citations,
    support,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("20 days [1].", [1]),
        ("Yes [2][1] and no [2].", [2, 1]),
        ("See [1, 3] or [1，4].", [1, 3, 4]),
        ("Range [2-4].", [2, 3, 4]),
        ("中文引用【2】和[3、5]。", [2, 3, 5]),
        ("No citation here.", []),
        ("Year [2023-1] is no range.", [2023, 1]),
    ],
)
def test_parse_citations(text, expected):
    assert parse_citations(text) == expected


def test_strip_citations_keeps_punctuation_tidy():
    assert strip_citations("It closes at 3 pm [1].") == "It closes at 3 pm."
    assert strip_citations("每月100元【2】。") == "每月100元。"


def test_split_sentences_english_chinese_and_glued_passages():
    assert split_sentences("It is 20 days. Ask early! [1]") == ["It is 20 days.", "Ask early! [1]"]
    assert split_sentences("年假有20天。病假另计！") == ["年假有20天。", "病假另计！"]
    assert split_sentences("He is a director.Aleksander Ford was born in the U.S. in 1908.") == [
        "He is a director.",
        "Aleksander Ford was born in the U.S. in 1908.",
    ]
    assert split_sentences("First line\nSecond line") == ["First line", "Second line"]


def test_support_is_the_share_of_claim_terms_found_in_sources():
    # content terms of the claim: full, time, staff, get, 20, days (stopwords dropped)
    assert content_terms("Full-time staff get 20 days [1].") == {"full", "time", "staff", "get", "20", "days"}
    assert support("Full-time staff get 20 days.", ["Full-time employees get 20 days of leave."]) == pytest.approx(5 / 6)
    assert support("Nothing in common.", ["Full-time employees get 20 days."]) == 0.0
    assert support("年假有20天。", ["员工年假有20天。"]) == 1.0


def test_sentence_units_join_back_to_the_text_with_the_whitespace_after_each():
    text = "# Leave\n\nIt is 20 days. Ask early!  年假有20天。病假另计！\n- a list item\nHe is a director.Aleksander Ford."
    units = sentence_units(text)
    assert "".join(units) == text
    assert units == [
        "# Leave\n\n",
        "It is 20 days. ",
        "Ask early!  ",
        "年假有20天。",
        "病假另计！\n",
        "- a list item\n",
        "He is a director.",
        "Aleksander Ford.",
    ]


def test_short_sentence_units_join_the_next_and_the_last_joins_the_one_before():
    text = "# Leave\n\nAnnual leave is fifteen days. Yes. Sick leave is separate. Ok."
    assert sentence_units(text, min_chars=20) == [
        "# Leave\n\nAnnual leave is fifteen days. ",
        "Yes. Sick leave is separate. Ok.",
    ]
    assert sentence_units("Short. Tiny.", min_chars=20) == ["Short. Tiny."]
    assert sentence_units("  \n", min_chars=0) == ["  \n"] and sentence_units("") == []
