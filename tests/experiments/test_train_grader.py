import pytest

from experiments.datasets.halueval import shuffled_indices
from experiments.tuning.train_grader import training_pairs, without_answer
from pipelines.models import ModelUnavailableError, resolve_model

ROWS = [
    {"question": "Which river flows through Paris?", "knowledge": "The Seine flows through Paris, the capital of France.",
     "right_answer": "the Seine"},
    {"question": "Who painted the Mona Lisa?", "knowledge": "Leonardo da Vinci painted the Mona Lisa in Florence.",
     "right_answer": "Leonardo da Vinci"},
    {"question": "What is the capital of Italy?", "knowledge": "Rome is the capital of Italy and of the Lazio region.",
     "right_answer": "Rome"},
    {"question": "Which city hosts the Louvre?", "knowledge": "The Louvre museum in Paris holds the Mona Lisa.",
     "right_answer": "Paris"},
]


def test_each_question_gets_its_passage_and_bm25_near_misses_as_negatives():
    pairs = training_pairs(ROWS, [0, 1], negatives=1, stripped=False, seed=0)
    by_question = {}
    for question, passage, label in pairs:
        by_question.setdefault(question, []).append((label, passage))
    assert sorted(by_question["Which river flows through Paris?"], reverse=True) == [
        (1.0, ROWS[0]["knowledge"]), (0.0, ROWS[3]["knowledge"])]  # shares "Paris", not the answer
    assert sorted(by_question["Who painted the Mona Lisa?"], reverse=True) == [
        (1.0, ROWS[1]["knowledge"]), (0.0, ROWS[3]["knowledge"])]  # shares "Mona Lisa"
    assert len(pairs) == 4


def test_the_stripped_negative_is_the_gold_passage_less_the_sentences_that_state_the_answer():
    passage = "The Seine flows through Paris. It is 777 km long. Barges carry freight on it."
    assert without_answer(passage, "777 km") == "The Seine flows through Paris. Barges carry freight on it."
    assert without_answer(passage, "the Rhine") is None  # no sentence states it: the passage would be no negative
    assert without_answer("It is 777 km long.", "777 KM") is None  # nothing would be left
    rows = [{**ROWS[0], "knowledge": passage, "right_answer": "777 km"}, ROWS[1]]
    pairs = training_pairs(rows, [0], negatives=1, stripped=True, seed=0)
    assert sorted(label for _, p, label in pairs if p.startswith("The Seine")) == [0.0, 1.0]  # gold, then stripped
    assert len(pairs) == 3


def test_the_training_tail_is_in_no_evaluation_sample():
    tail = set(shuffled_indices(10_000, seed=0)[-1200:])
    assert not tail & set(shuffled_indices(10_000, seed=0)[:8_800]) and len(tail) == 1200


def test_a_missing_trained_model_says_how_to_train_it(tmp_path):
    with pytest.raises(ModelUnavailableError, match="this project trains it: ragtune train-grader"):
        resolve_model(str(tmp_path / "models" / "crag-grader"))


@pytest.mark.slow
def test_a_trained_grader_loads_as_the_cross_encoder_scorer(tmp_path):
    from haystack import Document
    from haystack_integrations.components.rankers.sentence_transformers import (
        SentenceTransformersSimilarityRanker,
    )

    from components.crag.crag_evaluator import CRAGEvaluator
    from experiments.tuning.train_grader import held_out_auc, train

    pairs = training_pairs(ROWS, [0, 1, 2, 3], negatives=1, stripped=False, seed=0)
    train(pairs, tmp_path / "grader", epochs=1, batch_size=4, lr=5e-5, max_length=64, seed=0)
    assert 0.0 <= held_out_auc(tmp_path / "grader", pairs) <= 1.0
    scorer = SentenceTransformersSimilarityRanker(model=str(tmp_path / "grader"), top_k=3, scale_score=True)
    evaluator = CRAGEvaluator(upper=0.9, lower=0.1, scorer=scorer)
    evaluator.warm_up()
    graded = evaluator.run(query=ROWS[0]["question"], documents=[Document(content=r["knowledge"]) for r in ROWS[:3]])["graded"]
    assert len(graded) == 3 and all(0.0 < d.meta["crag_score"] < 1.0 for d in graded)  # sigmoid probabilities
