import pytest
from haystack import Document
from omegaconf import OmegaConf

from components.answer.localized_prompt_builder import LocalizedChatPromptBuilder
from tests.support.paths import CONF

PROMPT = OmegaConf.to_container(OmegaConf.load(CONF / "prompt" / "grounded.yaml"))
DOCS = [Document(content="Full-time employees accrue 20 days of leave."), Document(content="员工年假为15天。")]


def builder():
    return LocalizedChatPromptBuilder(PROMPT["templates"], PROMPT["refusals"], PROMPT["default_language"])


def test_english_question_gets_numbered_chunks_and_the_rules_before_and_after_them():
    result = builder().run(query="How many leave days?", documents=DOCS)
    assert result["language"] == "en"
    last = result["prompt"][-1].text
    assert "[1] Full-time employees accrue 20 days of leave." in last and "[2] 员工年假为15天。" in last
    assert last.index("[2]") < last.index("Question: How many leave days?") < last.index("Remember:")
    assert PROMPT["refusals"]["en"] in result["prompt"][0].text and PROMPT["refusals"]["en"] in last


def test_chinese_question_gets_the_chinese_template_and_refusal():
    result = builder().run(query="年假有几天？", documents=DOCS)
    assert result["language"] == "zh"
    last = result["prompt"][-1].text
    assert "问题：年假有几天？" in last and PROMPT["refusals"]["zh"] in last


def test_unknown_language_falls_back_to_default():
    only_en = LocalizedChatPromptBuilder({"en": PROMPT["templates"]["en"]}, PROMPT["refusals"])
    assert only_en.run(query="年假有几天？", documents=DOCS)["language"] == "en"


def test_config_errors_are_named():
    with pytest.raises(ValueError, match="default_language"):
        LocalizedChatPromptBuilder({"zh": "x"}, {"zh": "y"})
    with pytest.raises(ValueError, match="refusals is missing"):
        LocalizedChatPromptBuilder({"en": "x", "zh": "y"}, {"en": "r"})


def test_to_dict_with_defaults():
    assert builder().to_dict() == {
        "type": "components.answer.localized_prompt_builder.LocalizedChatPromptBuilder",
        "init_parameters": {
            "templates": PROMPT["templates"],
            "refusals": PROMPT["refusals"],
            "default_language": PROMPT["default_language"],
        },
    }


def test_to_dict_holds_every_init_parameter_and_from_dict_restores_them():
    templates = {
        "en": '{% message role="user" %}EN {{ refusal }} {{ query }}{% endmessage %}',
        "zh": '{% message role="user" %}ZH {{ refusal }} {{ query }}{% endmessage %}',
    }
    refusals = {"en": "No.", "zh": "不。"}
    data = LocalizedChatPromptBuilder(templates, refusals, default_language="zh").to_dict()
    assert data == {
        "type": "components.answer.localized_prompt_builder.LocalizedChatPromptBuilder",
        "init_parameters": {"templates": templates, "refusals": refusals, "default_language": "zh"},
    }
    clone = LocalizedChatPromptBuilder.from_dict(data)
    assert (clone.templates, clone.refusals, clone.default_language) == (templates, refusals, "zh")
    assert clone.to_dict() == data
    assert clone.run(query="年假有几天？", documents=DOCS)["prompt"][0].text == "ZH 不。 年假有几天？"
