import pytest
from haystack import Document

from experiments.datasets.golden.items import EvidenceSpan, GoldenItem
from experiments.evaluation.context_metrics import context_scores, context_tokens, redundancy
from experiments.evaluation.relevance import Judged


def test_tokens_are_words_and_jieba_words():
    assert context_tokens([Document(content="Twenty days of leave."), Document(content="每月100元")]) == 4 + 3


def test_redundancy_counts_chunks_that_repeat_a_higher_one():
    a = Document(content="Full-time employees accrue 20 days of paid annual leave.")
    near = Document(content="Full-time employees accrue 20 days of paid annual leave!")
    other = Document(content="The hotel limit in London is $310.")
    assert redundancy([a, near, other]) == pytest.approx(1 / 3)
    assert redundancy([a, other]) == 0.0 and redundancy([a]) == 0.0


def item():
    quote = "Full-time employees accrue 20 days of paid annual leave."
    return GoldenItem(
        id="q", question="How many days?", reference_answer="20 days", evidence=(quote,),
        evidence_spans=((EvidenceSpan("leave", 0, len(quote)),),),
    )


def test_span_precision_and_recall_and_ragas_variants():
    text = "Full-time employees accrue 20 days of paid annual leave. " + "Part-timers accrue leave pro rata. " * 8
    quote_chunk = Document(content=text, meta={"doc_id": "leave", "span": [0, len(text)]})
    other = Document(content="The hotel limit in London is $310.", meta={"doc_id": "travel", "span": [0, 34]})
    judged = Judged(gains=(1, 0), n_units=1, mode="quote", ids=("a", "b"))
    scores = context_scores([quote_chunk, other], item(), judged, 0.9)
    assert scores["context/precision"] == 0.5 and scores["context/recall"] == 1.0
    # RAGAS compares a whole (here 330-character) chunk with the quote by Levenshtein similarity: containing the
    # quote verbatim still scores 0
    assert scores["context/ragas_recall"] == 0.0
    assert scores["context/id_precision"] == 0.5 and scores["context/id_recall"] == 1.0


def test_unanswerable_items_get_only_size_metrics():
    scores = context_scores([Document(content="x")], GoldenItem(id="u", question="?", answerable=False), None, 0.9)
    assert set(scores) == {"context/tokens", "context/redundancy"}
