"""The Optuna search space, written in Hydra's sweep syntax."""

import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

from experiments.tuning.search_space import SearchSpaceError, search_space


def test_each_sweep_form_becomes_its_distribution():
    space = search_space({
        "reranker": "choice(none, e5)",
        "retriever.top_k": "range(5, 55, 5)",
        "retriever.fusion.agreement_bonus": "interval(0.0, 1.0)",
        "retriever.candidates": "int(interval(20, 100))",
        "retriever.bm25.k1": "tag(log, interval(0.1, 3.0))",
        "retriever.fusion.mode": "dbsf",
    }, [])
    assert space.distributions == {
        "reranker": CategoricalDistribution(["none", "e5"]),
        "retriever.top_k": IntDistribution(5, 50, step=5),
        "retriever.fusion.agreement_bonus": FloatDistribution(0.0, 1.0),
        "retriever.candidates": IntDistribution(20, 100),
        "retriever.bm25.k1": FloatDistribution(0.1, 3.0, log=True),
    }
    assert space.fixed == {"retriever.fusion.mode": "dbsf"}


def test_the_command_line_replaces_an_entry_of_the_config_and_fixes_a_key():
    space = search_space({"retriever.top_k": "range(5, 55, 5)", "reranker": "choice(none, e5)"},
                         ["retriever.top_k=10,20", "reranker=e5"])
    assert space.distributions == {"retriever.top_k": CategoricalDistribution([10, 20])}
    assert space.fixed == {"reranker": "e5"}


def test_a_trial_goes_back_to_hydra_as_overrides_and_names_its_index_knobs():
    space = search_space({"ingest.chunk_size": "choice(300, 500)", "retriever.fusion.agreement_bonus": "interval(0, 1.0)",
                          "reranker": "choice(none, e5)"}, ["dataset.subset=en"])
    params = {"ingest.chunk_size": 300, "retriever.fusion.agreement_bonus": 0.123456, "reranker": None}
    assert space.overrides(params) == ["dataset.subset=en", "ingest.chunk_size=300",
                                       "retriever.fusion.agreement_bonus=0.1235", "reranker=null"]
    assert space.index_params(params) == (("ingest.chunk_size", "300"),)


def test_a_space_with_nothing_to_search_is_refused_naming_the_key():
    with pytest.raises(SearchSpaceError, match="hydra.sweeper.params: nothing to search"):
        search_space({"retriever.top_k": "10"}, [])
