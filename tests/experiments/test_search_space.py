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


def shipped_space():
    from omegaconf import OmegaConf

    from tests.support.paths import CONF

    params = OmegaConf.load(CONF / "hydra" / "sweeper" / "optuna.yaml").params
    return search_space({str(key): str(value) for key, value in params.items()}, [])


def test_the_shipped_space_searches_the_index_strategies_that_exist_and_their_sizes():
    from tests.support.paths import CONF

    space = shipped_space()
    strategies = space.distributions["ingest"].choices
    assert set(strategies) == {"recursive", "sentence_window", "semantic", "parent_child", "hierarchical"}
    assert [s for s in strategies if not (CONF / "ingest" / f"{s}.yaml").is_file()] == []
    assert {"ingest.chunk_size", "ingest.window"} <= set(space.distributions)
    assert ("ingest", "sentence_window") in space.index_params({"ingest": "sentence_window", "reranker": "e5"})


def test_every_strategy_composes_with_every_size_and_a_size_it_does_not_read_changes_nothing():
    from omegaconf import OmegaConf

    from experiments.runs.config import compose, validate
    from pipelines.index import ingest_spec

    space = shipped_space()
    sizes = [key for key in space.distributions if key.startswith("ingest.")]

    def built(strategy, key, value):
        cfg = compose([f"ingest={strategy}", f"{key}={value}"])
        settings = validate(cfg)
        return ingest_spec(settings.ingest, None), OmegaConf.to_container(cfg.answer.stage, resolve=True)

    read = {}
    for strategy in space.distributions["ingest"].choices:
        for key in sizes:
            values = space.distributions[key].choices
            read[strategy, key] = built(strategy, key, values[0]) != built(strategy, key, values[-1])
    assert read["recursive", "ingest.chunk_size"] and read["sentence_window", "ingest.window"]
    assert read["parent_child", "ingest.parent_size"] and read["hierarchical", "ingest.chunk_size"]
    assert not read["recursive", "ingest.window"] and not read["recursive", "ingest.parent_size"]
    # Under sentence_window, chunk_size reaches only the guard: how long a table or code block may stay whole.
    (small, stage), (large, _) = (built("sentence_window", "ingest.chunk_size", v) for v in (300, 700))
    assert small["components"].pop("guard") != large["components"].pop("guard") and small == large
    assert [key for key in sizes if not any(read[s, key] for s in space.distributions["ingest"].choices)] == []
