import pytest
from haystack.core.serialization import component_from_dict, component_to_dict

from components.answer.honest_refusal import HonestRefusal
from pipelines.answer_contract import check_answer, missing_declaration

REFUSALS = {"en": "I cannot answer this from the provided documents.", "zh": "根据提供的资料无法回答。"}


@pytest.mark.parametrize(("question", "text"), [("Can I bring my dog?", REFUSALS["en"]), ("可以带狗吗？", REFUSALS["zh"])])
def test_refuses_in_the_questions_language_keeping_the_answer_contract(question, text):
    answer = check_answer(HonestRefusal(REFUSALS).run(query=question)["answers"][0], "refusal")
    assert answer.data == text and answer.query == question and answer.documents == []
    assert answer.meta["refused"] is True and answer.meta["citations"] == answer.meta["unsupported_sentences"] == []
    assert answer.meta["refusal_reason"] == "crag_incorrect"
    assert missing_declaration(HonestRefusal(REFUSALS)) == []


def test_a_language_without_a_sentence_falls_back_to_english_and_english_is_required():
    assert HonestRefusal({"en": "No."}).run(query="可以带狗吗？")["answers"][0].data == "No."
    with pytest.raises(ValueError, match="need an 'en' sentence"):
        HonestRefusal({"zh": "不"})


def test_serialisation():
    data = component_to_dict(HonestRefusal(REFUSALS, reason="r"), "refusal")
    assert data == {"type": "components.answer.honest_refusal.HonestRefusal", "init_parameters": {"refusals": REFUSALS, "reason": "r"}}
    assert component_from_dict(HonestRefusal, data, "refusal").reason == "r"
