import pytest
from haystack import Document

from components.answer.citation_verifier import CitationVerifier
from components.answer.extractive_answerer import ExtractiveAnswerer

REFUSALS = {"en": "I cannot answer this from the provided documents.", "zh": "根据提供的资料无法回答。"}
DOCS = [
    Document(content="# Leave\nSick leave is unlimited with a note. Full-time employees accrue 20 days of annual leave."),
    Document(content="全职员工每年享有15天带薪年假。病假需要提供证明。"),
]


def test_quotes_the_sentence_that_covers_the_question_and_cites_its_chunk():
    reply = ExtractiveAnswerer(REFUSALS, min_score=0.3).run(query="How many days of annual leave do full-time employees accrue?", documents=DOCS)
    assert reply["replies"][0].text == "Full-time employees accrue 20 days of annual leave. [1]"


def test_chinese_question_is_answered_from_the_chinese_chunk():
    reply = ExtractiveAnswerer(REFUSALS, min_score=0.3).run(query="全职员工每年有几天带薪年假？", documents=DOCS)
    assert reply["replies"][0].text == "全职员工每年享有15天带薪年假。 [2]"


def test_refuses_in_the_question_language_when_nothing_covers_it():
    answerer = ExtractiveAnswerer(REFUSALS, min_score=0.5)
    assert answerer.run(query="What is the dental deductible?", documents=DOCS)["replies"][0].text == REFUSALS["en"]
    assert answerer.run(query="牙科保险免赔额是多少？", documents=DOCS)["replies"][0].text == REFUSALS["zh"]
    assert answerer.run(query="Anything?", documents=[])["replies"][0].text == REFUSALS["en"]


def test_its_answers_verify_as_supported():
    reply = ExtractiveAnswerer(REFUSALS, min_score=0.3, max_sentences=2).run(query="annual leave full-time days", documents=DOCS)
    result = CitationVerifier(REFUSALS).run(query="q", replies=reply["replies"], documents=DOCS)
    assert result["unsupported_sentences"] == [] and result["answers"][0].meta["citations"]


@pytest.mark.parametrize("kwargs", [{"min_score": 1.5}, {"max_sentences": 0}])
def test_bad_params(kwargs):
    with pytest.raises(ValueError):
        ExtractiveAnswerer(REFUSALS, **kwargs)
    with pytest.raises(ValueError, match="'en'"):
        ExtractiveAnswerer({"zh": "x"})


def test_to_dict_with_defaults():
    assert ExtractiveAnswerer(REFUSALS).to_dict() == {
        "type": "components.answer.extractive_answerer.ExtractiveAnswerer",
        "init_parameters": {"refusals": REFUSALS, "min_score": 0.5, "max_sentences": 1, "rank_penalty": 0.1},
    }


def test_to_dict_holds_every_init_parameter_and_from_dict_restores_them():
    data = ExtractiveAnswerer(REFUSALS, min_score=0.2, max_sentences=2, rank_penalty=0.3).to_dict()
    assert data == {
        "type": "components.answer.extractive_answerer.ExtractiveAnswerer",
        "init_parameters": {"refusals": REFUSALS, "min_score": 0.2, "max_sentences": 2, "rank_penalty": 0.3},
    }
    clone = ExtractiveAnswerer.from_dict(data)
    restored = (clone.refusals, clone.min_score, clone.max_sentences, clone.rank_penalty)
    assert restored == (REFUSALS, 0.2, 2, 0.3)
    assert clone.to_dict() == data


def test_rank_penalty_lets_the_retriever_order_break_near_ties():
    docs = [Document(content="Annual leave requests go to your manager."), Document(content="Annual leave is 20 days.")]
    query = "annual leave days"
    assert ExtractiveAnswerer(REFUSALS, min_score=0, rank_penalty=0).rank(query, docs)[0].chunk == 2  # covers all
    preferred = ExtractiveAnswerer(REFUSALS, min_score=0, rank_penalty=0.9).rank(query, docs)
    assert [c.chunk for c in preferred] == [1, 2]


def test_the_rank_penalty_orders_sentences_but_does_not_cause_refusals():
    docs = [Document(content="Parking permits cost $40."), Document(content="Annual leave is 20 days.")]
    answerer = ExtractiveAnswerer(REFUSALS, min_score=0.5, rank_penalty=0.9)
    best = answerer.rank("annual leave days", docs)[0]
    assert best.chunk == 2 and best.coverage == 1.0 and best.score == pytest.approx(0.1)
    assert answerer.run(query="annual leave days", documents=docs)["replies"][0].text == "Annual leave is 20 days. [2]"
