import pytest
from haystack import Document, Pipeline
from haystack.core.serialization import component_to_dict

from components.crag.crag_evaluator import CRAGEvaluator
from components.rankers.e5_reranker import E5Reranker


def scored(*scores: float) -> list[Document]:
    return [Document(id=f"d{i}", content=f"passage {i}", score=s) for i, s in enumerate(scores)]


@pytest.mark.parametrize(("scores", "label", "kept"), [
    ((0.9, 0.5, 0.1), "correct", ["d0"]),  # any passage relevant
    ((0.5, 0.6, 0.1), "ambiguous", ["d1", "d0"]),  # none relevant, some not irrelevant: those, best first
    ((0.2, 0.1, 0.0), "incorrect", []),  # all irrelevant
    ((0.8, 0.4, 0.39), "correct", ["d0"]),  # upper and lower are inclusive bounds of relevant and ambiguous
])
def test_the_label_follows_crags_rule(scores, label, kept):
    out = CRAGEvaluator(upper=0.8, lower=0.4).run(query="q", documents=scored(*scores))
    assert out["label"] == label and [d.id for d in out["documents"]] == kept and out["query"] == "q"
    assert [d.meta["crag_score"] for d in out["graded"]] == sorted(scores, reverse=True)
    grade = {0.9: "relevant", 0.8: "relevant", 0.6: "ambiguous", 0.5: "ambiguous", 0.4: "ambiguous"}
    assert [d.meta["crag_grade"] for d in out["graded"]] == [grade.get(s, "irrelevant") for s in sorted(scores, reverse=True)]


def test_a_correct_question_may_keep_the_ambiguous_passages_too():
    out = CRAGEvaluator(upper=0.8, lower=0.4, correct_keeps="not_irrelevant").run(query="q", documents=scored(0.5, 0.9, 0.1))
    assert out["label"] == "correct" and [d.id for d in out["documents"]] == ["d1", "d0"]
    with pytest.raises(ValueError, match="correct_keeps must be one of"):
        CRAGEvaluator(upper=0.8, lower=0.4, correct_keeps="all")


def test_only_the_first_top_k_are_graded_and_nothing_retrieved_is_incorrect():
    out = CRAGEvaluator(upper=0.8, lower=0.4, top_k=2).run(query="q", documents=scored(0.1, 0.2, 0.95))
    assert out["label"] == "incorrect" and len(out["graded"]) == 2
    assert CRAGEvaluator(upper=0.8, lower=0.4).run(query="q", documents=[])["label"] == "incorrect"


def test_bad_thresholds_are_refused():
    with pytest.raises(ValueError, match=r"lower \(0.9\) must not exceed upper \(0.5\)"):
        CRAGEvaluator(upper=0.5, lower=0.9)
    with pytest.raises(ValueError, match="top_k must be >= 1"):
        CRAGEvaluator(upper=0.5, lower=0.1, top_k=0)


def test_e5_scores_the_passages_in_both_languages():
    docs = [Document(id="leave", content="Full-time employees get 20 days of paid annual leave."),
            Document(id="zh", content="员工出差住宿标准为一线城市每晚不超过600元。"),
            Document(id="dogs", content="The cafeteria serves lunch from noon to two.")]
    evaluator = CRAGEvaluator(upper=0.86, lower=0.8, scorer=E5Reranker(top_k=3))
    evaluator.warm_up()
    en = evaluator.run(query="How many days of annual leave do full-time staff get?", documents=docs)
    zh = evaluator.run(query="一线城市出差每晚住宿能报多少？", documents=docs)
    assert en["graded"][0].id == "leave" and zh["graded"][0].id == "zh"
    assert all(0 < d.meta["crag_score"] <= 1 for d in en["graded"] + zh["graded"])
    assert en["graded"][0].meta["crag_score"] > en["graded"][-1].meta["crag_score"] + 0.05


def test_serialisation_keeps_the_scorer():
    evaluator = CRAGEvaluator(upper=0.86, lower=0.8, scorer=E5Reranker(top_k=3), top_k=3)
    data = component_to_dict(evaluator, "crag")
    assert data == {
        "type": "components.crag.crag_evaluator.CRAGEvaluator",
        "init_parameters": {"upper": 0.86, "lower": 0.8, "top_k": 3, "correct_keeps": "relevant",
                            "scorer": component_to_dict(E5Reranker(top_k=3), "scorer")},
    }
    pipeline = Pipeline()
    pipeline.add_component("crag", evaluator)
    restored = Pipeline.loads(pipeline.dumps(), allowed_modules=["components"]).get_component("crag")
    assert isinstance(restored.scorer, E5Reranker) and restored.scorer.top_k == 3
    assert component_to_dict(CRAGEvaluator(upper=1, lower=0), "c")["init_parameters"]["scorer"] is None
