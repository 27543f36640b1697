from haystack.core.serialization import component_from_dict, component_to_dict

from components.answer.fixed_reply import FixedReply
from pipelines.answer_contract import check_answer, missing_declaration

CLARIFY = {"en": "Which policy do you mean by “{question}”?", "zh": "您说的“{question}”指哪项制度？"}


def test_replies_in_the_questions_language_with_the_question_filled_in_and_keeps_the_contract():
    reply = FixedReply(CLARIFY, reason="clarify")
    answer = check_answer(reply.run(query=" 这个能报销吗？ ")["answers"][0], "clarify")
    assert answer.data == "您说的“这个能报销吗？”指哪项制度？"
    assert answer.meta["refused"] is False and answer.meta["reply_reason"] == "clarify"
    assert answer.meta["citations"] == answer.meta["unsupported_sentences"] == [] and answer.documents == []
    assert missing_declaration(reply) == []
    assert FixedReply(CLARIFY).run(query="Is it {x}?")["answers"][0].data == "Which policy do you mean by “Is it {x}?”?"


def test_a_refusing_reply_and_serialisation():
    refusal = FixedReply({"en": "No."}, refused=True, reason="r").run(query="可以吗？")["answers"][0]
    assert refusal.data == "No." and refusal.meta["refused"] is True and refusal.meta["refusal_reason"] == "r"
    data = component_to_dict(FixedReply(CLARIFY, reason="clarify"), "reply")
    assert data == {"type": "components.answer.fixed_reply.FixedReply",
                    "init_parameters": {"replies": CLARIFY, "refused": False, "reason": "clarify"}}
    assert component_from_dict(FixedReply, data, "reply").replies == CLARIFY
