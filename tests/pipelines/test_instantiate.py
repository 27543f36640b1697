import pytest

from pipelines.instantiate import component_groups, current_target, locate
from pipelines.spec import PipelineConfigError
from tests.support.paths import ROOT


def test_a_target_from_before_the_grouping_finds_its_class_in_its_group():
    """Bundles promoted before components/ had groups name `components.<module>.<Class>` (tests/fixtures has one)."""
    old = "components.bm25_retriever.BM25sRetriever"
    assert current_target(old) == "components.retrievers.bm25_retriever.BM25sRetriever"
    assert locate(old, "x") is locate(current_target(old), "x")
    for target in ("components.retrievers.bm25_retriever.BM25sRetriever", "haystack.components.joiners.DocumentJoiner",
                   "components.nothing_here.Cls"):
        assert current_target(target) == target


def test_a_factory_from_before_its_move_is_found_where_it_lives_now():
    """A store=weaviate model promoted before pipelines/index/ existed names the store's factory by its old path."""
    old = "pipelines.weaviate_store.weaviate_document_store"
    assert locate(old, "store") is locate("pipelines.index.weaviate.weaviate_document_store", "store")


def test_every_component_module_is_in_exactly_one_group():
    groups = component_groups()
    assert groups["rank_fusion_joiner"] == "joiners" and groups["crag_evaluator"] == "crag"
    modules = [path.stem for path in (ROOT / "components").glob("*/*.py") if path.stem != "__init__"]
    assert sorted(modules) == sorted(groups)  # no module name in two groups, where an old target would be ambiguous


def test_an_unknown_target_still_names_its_key():
    with pytest.raises(PipelineConfigError, match="pipeline.components.x._target_: cannot import module"):
        locate("components.nothing_here.Cls", "pipeline.components.x")
