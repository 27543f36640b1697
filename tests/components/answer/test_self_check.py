import pytest
from haystack import Document
from haystack.dataclasses import ChatMessage, GeneratedAnswer

from components.answer.self_check import RETRY_META, SelfCheck

REFUSALS = {"en": "I cannot answer.", "zh": "无法回答。"}
FEEDBACK = {"en": "Unsupported: {sentences} Else say: {refusal}", "zh": "不支持：{sentences} 否则：{refusal}"}
CONTEXT = [Document(content="Interns get 10 days of leave.")]


def verified(text: str, unsupported: list[str], query: str = "How many days?", refused: bool = False) -> GeneratedAnswer:
    meta = {"raw": text, "refused": refused, "citations": [], "unsupported_sentences": unsupported, "sentences": [],
            "invalid_citations": [], "usage": {}}
    return GeneratedAnswer(data=text, query=query, documents=[], meta=meta)


def prompt(retries: int = 0) -> list[ChatMessage]:
    feedback = [ChatMessage.from_user("again", meta={RETRY_META: i + 1}) for i in range(retries)]
    return [ChatMessage.from_user("Question: How many days?"), *feedback]


def test_a_supported_answer_is_accepted_with_its_retry_count():
    out = SelfCheck(2, REFUSALS, FEEDBACK).run(answers=[verified("10 days [1].", [])], messages=prompt(1), documents=CONTEXT)
    assert set(out) == {"answers"}
    assert out["answers"][0].data == "10 days [1]." and out["answers"][0].meta["selfcheck_retries"] == 1


def test_an_unsupported_answer_is_retried_with_feedback_naming_its_sentences_and_the_context():
    out = SelfCheck(2, REFUSALS, FEEDBACK).run(
        answers=[verified("Interns get 30 days.", ["Interns get 30 days."])], messages=prompt(), documents=CONTEXT
    )
    assert set(out) == {"retry_messages", "retry_documents"} and out["retry_documents"] == CONTEXT
    *first, reply, feedback = out["retry_messages"]
    assert first == prompt() and reply.text == "Interns get 30 days." and reply.is_from("assistant")
    assert feedback.text == "Unsupported: «Interns get 30 days.» Else say: I cannot answer."
    assert feedback.meta == {RETRY_META: 1}


def test_the_last_retry_that_is_still_unsupported_refuses_in_the_questions_language():
    answer = verified("实习生有30天。", ["实习生有30天。"], query="实习生有几天假？")
    out = SelfCheck(2, REFUSALS, FEEDBACK).run(answers=[answer], messages=prompt(2), documents=CONTEXT)
    refusal = out["answers"][0]
    assert refusal.data == "无法回答。" and refusal.meta["refused"] and refusal.meta["refusal_reason"] == "selfcheck"
    assert refusal.meta["selfcheck_retries"] == 2 and refusal.meta["selfcheck_rejected"] == "实习生有30天。"
    assert refusal.meta["citations"] == [] and refusal.meta["unsupported_sentences"] == []


def test_a_refusal_is_kept_and_max_retries_0_keeps_an_unsupported_answer():
    refused = verified("I cannot answer.", [], refused=True)
    out = SelfCheck(2, REFUSALS, FEEDBACK).run(answers=[refused], messages=prompt(), documents=CONTEXT)
    assert out["answers"][0].data == "I cannot answer." and out["answers"][0].meta["selfcheck_retries"] == 0
    unsupported = verified("Maybe 30.", ["Maybe 30."])
    out = SelfCheck(0, REFUSALS, FEEDBACK).run(answers=[unsupported], messages=prompt(), documents=CONTEXT)
    assert out["answers"][0].data == "Maybe 30." and out["answers"][0].meta["selfcheck_retries"] == 0


def test_serialises_and_validates():
    check = SelfCheck(1, REFUSALS, FEEDBACK)
    data = check.to_dict()
    assert data == {"type": "components.answer.self_check.SelfCheck",
                    "init_parameters": {"max_retries": 1, "refusals": REFUSALS, "feedback": FEEDBACK}}
    assert SelfCheck.from_dict(data).to_dict() == data
    with pytest.raises(ValueError, match="max_retries must be >= 0"):
        SelfCheck(-1, REFUSALS, FEEDBACK)
    with pytest.raises(ValueError, match="feedback needs an 'en' entry"):
        SelfCheck(1, REFUSALS, {"zh": "x"})
