"""Which models a pipeline runs, by content: recorded with each run as `ragtune.model.<slot>`, and checked again
when a promoted run is served, so that a different package version or a retrained model never serves silently."""

from __future__ import annotations

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
        section = settings.section(declared.section)
        if isinstance(section, dict) and section.get("model") and declared.component in present:
            slots[slot] = {"model": section["model"], **(section.get("endpoint") or {})}
    return slots


def model_identities(settings: RunSettings, query: BuiltPipeline, embedder: str) -> dict[str, str]:
    """Slot -> model identity for every model the query pipeline runs; `embedder` is the index embedder's, already
    computed for the index fingerprint (a folder's identity hashes its files)."""
    identities = {"embedder": embedder}
    if query.llm_components:
        identities["generator"] = generator_identity(settings.section("models.generator"))
    answer = settings.section("answer") or {}
    if settings.pipeline.answer is not None and answer.get("model"):  # it runs the answer stage
        identities["answer"] = model_identity(answer["model"])
    identities |= {slot: generator_identity(model) for slot, model in slot_models(settings, query).items()}
    return identities


def identity_tags(identities: dict[str, str]) -> dict[str, str]:
    return {f"{MODEL_TAG_PREFIX}{slot}": identity for slot, identity in identities.items()}
