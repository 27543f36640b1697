"""Which models a pipeline runs, by content: recorded with each run as `ragtune.model.<slot>`, and checked again
when a promoted run is served, so that a different package version or a retrained model never serves silently."""

from __future__ import annotations

import dataclasses
from typing import Any

from experiments.runs.run_settings import RunSettings
from pipelines.built import BuiltPipeline
from pipelines.models import generator_identity, model_identity
from pipelines.run_layout import MODEL_TAG_PREFIX


def slot_models(settings: RunSettings, query: BuiltPipeline) -> dict[str, dict[str, Any]]:
    """The model of each LLM slot in this pipeline, with its endpoint's keys when it has one."""
    present = dict(query.pipeline.walk())
    slots = {}
    for slot, declared in query.model_slots.items():
        if declared.component in present and (model := settings.section(f"{declared.section}.model")):
            slots[slot] = {"model": model, **(settings.section(f"{declared.section}.endpoint") or {})}
    return slots


def model_identities(settings: RunSettings, query: BuiltPipeline, embedder: str) -> dict[str, str]:
    """Slot -> model identity for every model the query pipeline runs; `embedder` is the index embedder's, already
    computed for the index fingerprint (a folder's identity hashes its files)."""
    identities = {"embedder": embedder}
    if query.llm_components:
        identities["generator"] = generator_identity(dataclasses.asdict(settings.models.generator))
    if settings.pipeline.answer is not None and (model := settings.section("answer.model")):  # it runs the stage
        identities["answer"] = model_identity(model)
    identities |= {slot: generator_identity(model) for slot, model in slot_models(settings, query).items()}
    return identities


def identity_tags(identities: dict[str, str]) -> dict[str, str]:
    return {f"{MODEL_TAG_PREFIX}{slot}": identity for slot, identity in identities.items()}
