import pytest
from haystack.dataclasses import GeneratedAnswer

from components.common.words import answer_tokens
from experiments.evaluation.answer_metrics import (
    answer_scores,
    chrf,
    exact_match,
    rouge_l,
    token_f1,
)


def test_tokens_follow_squad_normalisation_and_jieba_for_chinese():
    assert answer_tokens("The 20 days, of Leave!") == ["20", "days", "of", "leave"]
    assert answer_tokens("每月100元") == ["每月", "100", "元"]


def test_token_f1_and_exact_match_by_hand_english():
    # prediction tokens: about 20 days | reference: 20 days -> common 2, P = 2/3, R = 1, F1 = 0.8
    assert token_f1("About 20 days.", "20 days") == pytest.approx(0.8)
    assert exact_match("The 20 days.", "20 days") == 1.0
    assert exact_match("About 20 days", "20 days") == 0.0
    assert token_f1("nothing shared", "20 days") == 0.0


def test_token_f1_by_hand_chinese():
    # 每月 / 100 / 元 against 每人每年 / 1200 / 元: common = {元} -> P = 1/3, R = 1/3, F1 = 1/3
    assert answer_tokens("每人每年1200元") == ["每人每年", "1200", "元"]
    assert token_f1("每月100元", "每人每年1200元") == pytest.approx(1 / 3)
    assert token_f1("每月100元", "每月100元") == 1.0


def test_rouge_l_scores_chinese_words_where_rouge_score_alone_gives_zero():
    # LCS of [每月, 100, 元] and [每月, 100, 元, 补贴] is 3 -> P = 1, R = 3/4, F = 6/7
    assert rouge_l("每月100元", "每月100元补贴") == pytest.approx(6 / 7)
    assert rouge_l("20 days of leave", "20 days") == pytest.approx(2 * 0.5 / 1.5)


def test_chrf_is_ragas_character_f_score_in_unit_range():
    assert chrf("20 days", "20 days") == pytest.approx(1.0)
    assert 0 < chrf("20 days of paid leave", "20 days") < 1
    assert 0 < chrf("每月100元", "每月100元补贴") < 1


def answer(text, refused=False, sentences=(), citations=(), invalid=()):
    """An answer as the contract describes it (pipelines/answer_contract.py)."""
    meta = {
        "refused": refused,
        "citations": [{"marker": n} for n in citations],
        "invalid_citations": list(invalid),
        "unsupported_sentences": [s["text"] for s in sentences if not s["supported"]],
        "sentences": list(sentences),
    }
    return GeneratedAnswer(data=text, query="q", documents=[], meta=meta)


def test_answer_scores_for_an_answered_question_with_citations():
    sentences = [
        {"text": "20 days.", "citations": [1], "support": 1.0, "supported": True},
        {"text": "Ask HR.", "citations": [2], "support": 0.0, "supported": False},
    ]
    scores = answer_scores(
        answer("20 days [1]. Ask HR [2].", sentences=sentences, citations=[1, 2]), "20 days", answerable=True
    )
    assert scores["answer/citation_accuracy"] == 0.5  # [1] backs a supported sentence, [2] does not
    assert scores["answer/unsupported_sentence_rate"] == 0.5
    assert scores["answer/false_refusal_rate"] == 0.0 and "answer/refusal_accuracy" not in scores
    # a citation of a chunk outside the context counts against accuracy
    assert answer_scores(answer("20 days [1] [7].", sentences=sentences[:1], citations=[1], invalid=[7]), "20 days",
                         answerable=True)["answer/citation_accuracy"] == 0.5
    assert scores["answer/f1"] == pytest.approx(token_f1("20 days. Ask HR.", "20 days"))


def test_a_refusal_scores_zero_on_answerable_and_counts_on_unanswerable():
    refused = answer("I cannot answer.", refused=True)
    answerable = answer_scores(refused, "20 days", answerable=True)
    assert answerable["answer/f1"] == 0 and answerable["answer/false_refusal_rate"] == 1.0
    assert "answer/citation_accuracy" not in answerable
    unanswerable = answer_scores(refused, None, answerable=False)
    assert unanswerable["answer/refusal_accuracy"] == 1.0 and "answer/f1" not in unanswerable
    answered = answer_scores(answer("It is $50."), None, answerable=False)
    assert answered["answer/refusal_accuracy"] == 0.0
    assert answer_scores(answer("No citation."), "x", answerable=True)["answer/citation_accuracy"] == 0.0


def test_semantic_similarity_uses_the_given_scorer():
    scores = answer_scores(answer("20 days"), "20 days", True, similarity=lambda a, b: 0.75)
    assert scores["answer/semantic_similarity"] == 0.75


def test_selfcheck_scores_come_from_the_answers_selfcheck_meta():
    meta = {"refused": True, "citations": [], "unsupported_sentences": [], "selfcheck_retries": 2,
            "refusal_reason": "selfcheck"}
    scores = answer_scores(GeneratedAnswer(data="I cannot answer.", query="q", documents=[], meta=meta), "20 days", True)
    assert {k: v for k, v in scores.items() if k.startswith("selfcheck/")} == {
        "selfcheck/fired_rate": 1.0, "selfcheck/retries_per_question": 2.0, "selfcheck/refusal_rate": 1.0}
    del meta["selfcheck_retries"]
    assert not any(k.startswith("selfcheck/") for k in answer_scores(
        GeneratedAnswer(data="x", query="q", documents=[], meta=meta), "20 days", True))
