import pytest
from haystack.dataclasses import ChatMessage
from omegaconf import OmegaConf

from components.query.history_rewriter import HistoryRewriter
from tests.support.paths import CONF


@pytest.fixture
def rewriter() -> HistoryRewriter:
    """The shipped configuration (conf/rewriter/rules.yaml)."""
    params = OmegaConf.to_container(OmegaConf.load(CONF / "rewriter" / "rules.yaml"))["component"]
    params.pop("_target_")
    return HistoryRewriter(**params)


def chat(*turns: str) -> list[ChatMessage]:
    return [ChatMessage.from_user(t) if i % 2 == 0 else ChatMessage.from_assistant(t) for i, t in enumerate(turns)]


def test_a_follow_up_gets_the_key_terms_of_the_last_user_turn(rewriter):
    history = chat("How many days of paid annual leave do full-time employees get?", "20 days per year.")
    out = rewriter.run(question="And for part-timers?", history=history)
    assert out["question"].startswith("And for part-timers? ")
    assert {"paid", "annual", "leave"} <= set(out["question"].split())
    assert "20" not in out["question"].split()  # the assistant's answer is not carried: it may be the wrong one
    assert out["queries"] == [out["question"]] and out["fallback"] is False


def test_a_chinese_follow_up_carries_jieba_words_without_stopwords(rewriter):
    history = chat("全职员工每年有多少天年假？", "15天。")
    out = rewriter.run(question="那实习生呢？", history=history)
    assert out["question"].startswith("那实习生呢？ ")
    carried = out["question"].split()[1:]
    assert "全职" in carried and "员工" in carried and "多少" not in carried


def test_complete_questions_and_questions_without_history_stay_as_asked(rewriter):
    history = chat("How many days of paid annual leave do full-time employees get?", "20 days.")
    standalone = "What is the daily meal allowance for an international business trip?"
    assert rewriter.run(question=standalone, history=history) == {"question": standalone, "queries": [], "fallback": False}
    assert rewriter.run(question="And for part-timers?")["queries"] == []
    assert rewriter.run(question="会议室最早可以提前几天预订？", history=chat("密码多久换一次？", "90天。"))["queries"] == []


@pytest.mark.parametrize(
    "question", ["And for part-timers?", "Does it apply to contractors too?", "P2的呢？", "如果超过了呢？", "它多久换一次？", "Why?"]
)
def test_follow_up_cues_and_short_questions(rewriter, question):
    assert rewriter.is_follow_up(question)


def test_serialisation_is_exact_and_round_trips():
    rewriter = HistoryRewriter(cues={"en": ["^and\\b"]}, max_own_terms=3, max_turns=2, max_terms=5)
    data = rewriter.to_dict()
    assert data == {
        "type": "components.query.history_rewriter.HistoryRewriter",
        "init_parameters": {"cues": {"en": ["^and\\b"]}, "max_own_terms": 3, "max_turns": 2, "max_terms": 5},
    }
    assert HistoryRewriter.from_dict(data).to_dict() == data


def test_bad_parameters_are_refused():
    with pytest.raises(ValueError, match="cues: a pattern does not compile"):
        HistoryRewriter(cues={"en": ["("]})
    with pytest.raises(ValueError, match="max_turns"):
        HistoryRewriter(cues={}, max_turns=0)
