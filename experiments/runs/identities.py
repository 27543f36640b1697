"""Which models a pipeline runs, by content: recorded with each run as `ragtune.model.<slot>`, and checked again
when a promoted run is served, so that a different package version or a retrained model never serves silently."""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig, OmegaConf

from pipelines.built import BuiltPipeline
from pipelines.models import generator_identity, model_identity
from pipelines.run_layout import MODEL_TAG_PREFIX


def slot_models(cfg: DictConfig, query: BuiltPipeline) -> dict[str, dict[str, Any]]:
    """The model of each LLM slot in this pipeline, with its endpoint's keys when it has one."""
    present = dict(query.pipeline.walk())
    slots = {}
    for slot, declared in query.model_slots.items():
        section = OmegaConf.select(cfg, declared.section)
        if isinstance(section, DictConfig) and section.get("model") and declared.component in present:
            slots[slot] = {"model": section.model, **(section.get("endpoint") or {})}
    return slots


def model_identities(cfg: DictConfig, query: BuiltPipeline, embedder: str) -> dict[str, str]:
    """Slot -> model identity for every model the query pipeline runs; `embedder` is the index embedder's, already
    computed for the index fingerprint (a folder's identity hashes its files)."""
    identities = {"embedder": embedder}
    if query.llm_components:
        identities["generator"] = generator_identity(cfg.models.generator)
    if OmegaConf.select(cfg, "pipeline.answer") is not None and cfg.answer.get("model"):  # it runs the answer stage
        identities["answer"] = model_identity(cfg.answer.model)
    identities |= {slot: generator_identity(model) for slot, model in slot_models(cfg, query).items()}
    return identities


def identity_tags(identities: dict[str, str]) -> dict[str, str]:
    return {f"{MODEL_TAG_PREFIX}{slot}": identity for slot, identity in identities.items()}
