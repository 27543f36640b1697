"""The one Han class and the two word counters, which differ on purpose."""

import pytest

from components.common.text import detect_language
from components.common.words import HAN, HAN_RUN, budget_words, prose_words


def test_han_holds_ideographs_of_every_block_and_nothing_else():
    ideographs = ["一", "鿿", "㐀", "䶿", "豈", "𠀀", "𠮷", "𪜀", chr(0x2EBE0)]
    assert all(HAN.fullmatch(c) for c in ideographs)
    assert not any(HAN.search(c) for c in ["a", "é", "テ", "한", "。", "！", chr(0x4DC0), chr(0x2EBF0), "1"])
    assert HAN_RUN.findall("北京𠮷野家 and 上海") == ["北京𠮷野家", "上海"]


def test_the_tokeniser_sees_the_same_han():
    assert detect_language("𠀀𠀁𠀂 abc") == "zh"


@pytest.mark.parametrize(("text", "budget", "prose"), [
    ("How do I sort a list?", 6, 6),
    ("文件系统权限", 6, 3),  # prose: two Han characters make a word
    ("sudo 配置", 3, 2),
    ("  ...  — !!", 3, 0),  # budget: punctuation standing alone is read too
    ("foo-bar baz_qux, 1.5", 3, 5),
    ("年假有十五天。", 7, 3),
    ("𠮷野家", 3, 2),
    ("", 0, 0),
])
def test_budget_words_cap_model_input_and_prose_words_measure_what_a_text_says(text, budget, prose):
    assert (budget_words(text), prose_words(text)) == (budget, prose)
