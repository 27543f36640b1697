"""AnswerMeta describes the meta the answer components really fill, so the typed contract cannot drift from them."""

from haystack import Document
from haystack.dataclasses import ChatMessage

from components.answer.answer_meta import (
    REQUIRED_KEYS,
    REQUIRED_TYPES,
    AnswerMeta,
    CitationMeta,
    SentenceSupport,
)
from components.answer.citation_verifier import CitationVerifier
from components.answer.fixed_reply import FixedReply
from pipelines.answer_contract import check_answer


def test_the_required_keys_and_types_come_from_the_typed_dict():
    assert REQUIRED_KEYS == ("refused", "citations", "unsupported_sentences")
    assert {"refused": bool, "citations": list, "unsupported_sentences": list} == REQUIRED_TYPES


def test_a_verified_answer_fills_only_keys_the_contract_types():
    verifier = CitationVerifier(refusals={"en": "I cannot answer this from the provided documents."})
    chunk = Document(id="c1", content="Staff get 20 days of leave.", meta={"doc_id": "leave", "span": [0, 27]})
    reply = ChatMessage.from_assistant("Staff get 20 days [1]. Also a pony [3].")
    answer = check_answer(verifier.run(query="Leave?", replies=[reply], documents=[chunk])["answers"][0], "answer")
    assert set(answer.meta) <= set(AnswerMeta.__annotations__)
    assert answer.meta["citations"] == [CitationMeta(marker=1, chunk_id="c1", doc_id="leave", start=0, end=27)]
    assert [set(s) for s in answer.meta["sentences"]] == [set(SentenceSupport.__annotations__)] * 2
    assert answer.meta["invalid_citations"] == [3]


def test_a_fixed_reply_fills_only_keys_the_contract_types():
    answer = FixedReply(replies={"en": "Hello!"}, reason="no_retrieval").run(query="hi")["answers"][0]
    assert set(check_answer(answer, "chat_reply").meta) <= set(AnswerMeta.__annotations__)
    assert answer.meta["reply_reason"] == "no_retrieval" and answer.meta["refused"] is False
