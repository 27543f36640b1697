"""The answer-unit rule: the shipped rules (conf/answer/by_type.yaml) on clear questions in both languages, its
serialisation, its errors, and the answer=by_type stage routing each question to one answerer."""

import pytest
from haystack import Document
from haystack.core.serialization import component_from_dict, component_to_dict
from omegaconf import OmegaConf

from components.answer.answer_unit_rule import AnswerUnitRule
from experiments.runs.config import compose
from pipelines.builder import build_pipeline

RULES = [{"unit": "sentence", "patterns": {"en": [r"\bwhy\b"], "zh": ["为什么"]}}]


def shipped_rule(default: str | None = None) -> AnswerUnitRule:
    answer = compose(["answer=by_type"]).answer
    return AnswerUnitRule(
        OmegaConf.to_container(answer.unit_rules, resolve=True), default or answer.default_unit
    )


# Clear cases, none of them a golden question of the demo or a doc set.
@pytest.mark.parametrize(
    ("question", "unit"),
    [
        ("Why does the badge reader beep twice?", "sentence"),
        ("How do I reset my VPN token?", "sentence"),
        ("What is the difference between a draft and a template?", "sentence"),
        ("为什么报销单被退回了？", "sentence"),
        ("新电脑怎么申请？", "sentence"),
        ("How many parking spaces does the Lyon office have?", "span"),
        ("Who signs off a visitor badge?", "span"),
        ("When is the canteen closed?", "span"),
        ("停车位每月多少钱？", "span"),
        ("哪个部门负责门禁卡？", "span"),
    ],
)
def test_the_shipped_rules_give_how_and_why_a_sentence_and_factoids_a_span(question, unit):
    assert shipped_rule().classify(question) == unit


def test_a_question_no_rule_matches_gets_the_default():
    assert shipped_rule().classify("Is the gym open on Sundays?") == "sentence"
    assert shipped_rule("span").classify("Is the gym open on Sundays?") == "span"
    assert shipped_rule("span").classify("Why is the gym closed?") == "sentence"


def test_run_gives_the_unit_and_the_question_and_round_trips():
    rule = AnswerUnitRule(RULES, default="span")
    assert rule.run(query="为什么要签名？") == {"unit": "sentence", "query": "为什么要签名？"}
    assert rule.run(query="Who signs?") == {"unit": "span", "query": "Who signs?"}
    assert component_to_dict(rule, "rule") == {
        "type": "components.answer.answer_unit_rule.AnswerUnitRule",
        "init_parameters": {"rules": RULES, "default": "span"},
    }
    again = component_from_dict(AnswerUnitRule, component_to_dict(rule, "rule"), "rule")
    assert (again.rules, again.default) == (RULES, "span")


@pytest.mark.parametrize(
    ("rules", "default", "message"),
    [
        (
            [{"unit": "paragraph", "patterns": {"en": ["x"]}}],
            "span",
            r"rules\[0\].unit: unknown unit 'paragraph'",
        ),
        (
            [{"unit": "span", "patterns": {"zh": ["("]}}],
            "span",
            r"rules\[0\].patterns.zh\[0\]: '\(' does not compile",
        ),
        ([{"unit": "span", "patterns": ["x"]}], "span", r"rules\[0\].patterns: expected \{language"),
        (RULES, "word", r"default: unknown unit 'word'"),
    ],
)
def test_bad_rules_name_the_rule(rules, default, message):
    with pytest.raises(ValueError, match=message):
        AnswerUnitRule(rules, default)


def test_the_by_type_stage_sends_each_question_to_one_answerer():
    """The stage as shipped, but with a second extractive answerer quoting two sentences in the span slot, so
    which answerer ran shows without the model."""
    spec = OmegaConf.to_container(
        compose(["pipeline=hybrid_rag", "answer=by_type"]).pipeline.answer, resolve=True
    )
    spec["components"]["extractor"] = {**spec["components"]["sentence_extractor"], "max_sentences": 2}
    stage = build_pipeline(spec, key="answer", input_names=None)
    context = [
        Document(
            content="Badges are printed at reception. The reader beeps twice when a badge expires. "
            "Reception opens at 8."
        )
    ]
    why = stage.answer(stage.run(question="Why does the badge reader beep twice?", context=context))
    when = stage.answer(stage.run(question="When does the badge reader beep twice?", context=context))
    assert why.data.count("[1]") == 1
    assert when.data.count("[1]") == 2
