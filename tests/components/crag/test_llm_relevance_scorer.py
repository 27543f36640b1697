"""The yes/no grader on the real Gemma-3-270M GGUF (its separating power is measured, not asserted: README, CRAG)."""

import math

import pytest
from haystack import Document

from components.answer.constrained_choice import option_probabilities
from components.crag.llm_relevance_scorer import LLMRelevanceScorer
from experiments.runs.config import compose
from pipelines.instantiate import instantiate_component

pytestmark = pytest.mark.slow
PASSAGES = [Document(id="leave", content="Full-time employees accrue 20 days of paid annual leave per calendar year."),
            Document(id="hotel", content="The nightly hotel limit is $310 in London.")]


@pytest.fixture(scope="module")
def scorer() -> LLMRelevanceScorer:
    built = instantiate_component(compose(["pipeline=crag", "crag/scorer=llm"]).crag.scorer.component, "scorer", {})
    built.warm_up()
    return built


def test_scores_are_probabilities_of_yes_best_first_and_repeatable(scorer):
    question = "How many days of annual leave do full-time employees get?"
    first = scorer.run(query=question, documents=PASSAGES)["documents"]
    assert [d.score for d in first] == sorted((d.score for d in first), reverse=True)
    assert all(0 < d.score < 1 for d in first) and {d.id for d in first} == {"leave", "hotel"}
    again = scorer.run(query=question, documents=list(reversed(PASSAGES)), top_k=1)["documents"]
    assert len(again) == 1 and again[0].id == first[0].id and math.isclose(again[0].score, first[0].score, rel_tol=1e-4)
    assert PASSAGES[0].score is None  # the input documents are not modified


def test_option_probabilities_sum_to_one_and_options_must_differ_in_their_first_token(scorer):
    probabilities = option_probabilities(scorer._llm, "Is the sky blue? Answer:", ("yes", "no"))
    assert set(probabilities) == {"yes", "no"} and math.isclose(sum(probabilities.values()), 1.0)
    with pytest.raises(ValueError, match="share a first token"):
        option_probabilities(scorer._llm, "Pick:", ("yes", "yes please"))


def test_serialisation_is_exact(scorer):
    data = scorer.to_dict()
    assert data["type"] == "components.crag.llm_relevance_scorer.LLMRelevanceScorer"
    assert set(data["init_parameters"]) == {"model", "template", "top_k", "max_passage_chars", "n_ctx", "model_kwargs"}
    assert LLMRelevanceScorer.from_dict(data).to_dict() == data
