import pytest
from haystack import Document
from haystack.dataclasses import ChatMessage

from components.answer.citation_verifier import CitationVerifier

REFUSALS = {"en": "I cannot answer this from the provided documents.", "zh": "根据提供的资料无法回答。"}
DOCS = [
    Document(id="a#0-40", content="Full-time employees accrue 20 days of paid leave.", meta={"doc_id": "a", "span": [0, 40]}),
    Document(id="b#5-30", content="The London hotel limit is $310 per night.", meta={"doc_id": "b", "span": [5, 30]}),
]


def verify(text, docs=DOCS, **kwargs):
    verifier = CitationVerifier(REFUSALS, ["(cannot|can't) answer"], **kwargs)
    return verifier.run(query="q", replies=[ChatMessage.from_assistant(text, meta={"usage": {"prompt_tokens": 7}})], documents=docs)


def test_supported_cited_sentences_give_sources_with_doc_ids_and_spans():
    result = verify("Full-time employees accrue 20 days [1]. London allows $310 per night [2].")
    answer = result["answers"][0]
    assert not answer.meta["refused"] and result["unsupported_sentences"] == []
    assert result["sources"] == [
        {"marker": 1, "chunk_id": "a#0-40", "doc_id": "a", "start": 0, "end": 40},
        {"marker": 2, "chunk_id": "b#5-30", "doc_id": "b", "start": 5, "end": 30},
    ]
    assert [d.id for d in answer.documents] == ["a#0-40", "b#5-30"]
    assert answer.meta["usage"] == {"prompt_tokens": 7}


def test_a_sentence_citing_the_wrong_chunk_or_none_is_unsupported():
    result = verify("Full-time employees accrue 20 days [2]. The hotel limit is $310.")
    assert result["unsupported_sentences"] == ["Full-time employees accrue 20 days.", "The hotel limit is $310."]
    sentences = result["answers"][0].meta["sentences"]
    assert sentences[0]["citations"] == [2] and sentences[0]["support"] < 0.5
    assert sentences[1]["citations"] == [] and not sentences[1]["supported"]


def test_citations_outside_the_context_are_dropped_and_reported():
    answer = verify("Employees accrue 20 days [1, 7]. See also [9].")["answers"][0]
    assert answer.meta["invalid_citations"] == [7, 9]
    assert answer.data == "Employees accrue 20 days [1]. See also."
    assert [c["marker"] for c in answer.meta["citations"]] == [1]


@pytest.mark.parametrize(
    "text",
    ["I cannot answer this from the provided documents.", "根据提供的资料无法回答。", "Sorry, I can't answer that.", ""],
)
def test_refusals_in_either_language_or_by_pattern(text):
    answer = verify(text)["answers"][0]
    assert answer.meta["refused"] and answer.meta["sentences"] == []


def test_support_threshold_decides():
    strict = verify("Full-time employees get 20 days [1].", support_threshold=1.0)
    lenient = verify("Full-time employees get 20 days [1].", support_threshold=0.5)
    assert strict["unsupported_sentences"] and not lenient["unsupported_sentences"]


def test_bad_params():
    with pytest.raises(ValueError, match="support_threshold"):
        CitationVerifier(REFUSALS, support_threshold=2)
    with pytest.raises(ValueError, match="refusal_patterns"):
        CitationVerifier(REFUSALS, ["("])


def test_to_dict_with_defaults():
    assert CitationVerifier(REFUSALS).to_dict() == {
        "type": "components.answer.citation_verifier.CitationVerifier",
        "init_parameters": {"refusals": REFUSALS, "refusal_patterns": [], "support_threshold": 0.5},
    }


def test_to_dict_holds_every_init_parameter_and_from_dict_restores_them():
    data = CitationVerifier(REFUSALS, ["no idea"], 0.7).to_dict()
    assert data == {
        "type": "components.answer.citation_verifier.CitationVerifier",
        "init_parameters": {"refusals": REFUSALS, "refusal_patterns": ["no idea"], "support_threshold": 0.7},
    }
    clone = CitationVerifier.from_dict(data)
    assert (clone.refusals, clone.refusal_patterns, clone.support_threshold) == (REFUSALS, ["no idea"], 0.7)
    assert clone.to_dict() == data
    assert clone.is_refusal("No idea, sorry.") and clone.is_refusal(REFUSALS["zh"])
