from experiments.evaluation.question_record import QuestionRecord

# A line of per_question.jsonl as run.py wrote it before QuestionRecord existed (pipeline=crag, one rewrite).
LOGGED = {
    "id": "en-3", "question": "And in London?", "category": "numeric", "answerable": True, "latency_ms": 512.25,
    "reference": "$310", "answer": "$310 [1]", "refused": False,
    "citations": [{"marker": 1, "chunk_id": "travel#0-42", "doc_id": "travel"}], "unsupported_sentences": [],
    "retrieval/chunks": [{"id": "travel#0-42", "doc_id": "travel", "score": 0.91}],
    "context/chunks": [{"id": "travel#0-42", "doc_id": "travel", "score": 0.91}],
    "stage/bm25/chunks": [{"id": "leave#0-75", "doc_id": "leave", "score": 3.2}],
    "retrieval/mrr_at_10": 1.0, "retrieval/hit_at_1": 1.0, "context/recall": 1.0, "answer/f1": 0.5,
    "answer/refused": False, "answer/semantic_similarity": None, "cost/llm_calls": 2,
    "layer": "generation", "crag_label": "correct", "crag_scores": [0.93], "crag_grades": ["relevant"],
    "judge_errors": {"answer/faithfulness": "TimeoutError: judge timed out"},
    "expected_route": "retrieve", "route": "retrieve", "rewritten_question": "What is the hotel limit in London?",
}


def test_a_logged_line_reads_back_typed_and_writes_back_unchanged():
    record = QuestionRecord.from_json(LOGGED)
    assert record.to_json() == LOGGED
    assert QuestionRecord.from_json(record.to_json()) == record
    assert (record.id, record.layer, record.answerable) == ("en-3", "generation", True)
    assert record.answer["answer"] == "$310 [1]" and record.routing["route"] == "retrieve"
    assert sorted(record.chunks) == ["context", "retrieval", "stage/bm25"]
    assert record.extras == {"crag_label": "correct", "crag_scores": [0.93], "crag_grades": ["relevant"],
                             "judge_errors": {"answer/faithfulness": "TimeoutError: judge timed out"}}


def test_scores_are_numbers_by_name_and_flags_or_gaps_are_not():
    record = QuestionRecord.from_json(LOGGED)
    assert record.score("answer/f1") == 0.5 and record.score("cost/llm_calls") == 2.0
    assert record.score("latency_ms") == 512.25
    assert record.score("answer/refused") is None  # a flag, not a score
    assert record.score("answer/semantic_similarity") is None and record.score("answer/nope") is None


def test_a_retrieval_only_record_has_no_answer():
    record = QuestionRecord.from_json({"id": 7, "question": "q", "category": "fact", "answerable": True,
                                       "latency_ms": 3.0, "reference": None, "retrieval/mrr_at_10": 0.5,
                                       "layer": "ok"})
    assert record.id == "7" and record.answer == {} and record.routing == {} and record.extras == {}
