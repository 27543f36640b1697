"""Bundles written by an older ragtune, brought to the current format once, as they are read, so that everything
downstream of `read_bundle` sees the current shape only. Nothing here writes into a bundle: a registered model's
files stay as registered.

The format is the `bundle_format` of identities.json; a bundle without one is format 1 (everything promoted before
the number was written). Format 2 guarantees what a format-1 bundle may lack:

    identities.json   `index_files`, the size of every file of the index snapshot (format 1 without it: nothing
                      to check)
    access.json       who may see each document (format 1 without it: read from the snapshot's chunks)
    config.yaml       component targets in their groups (`components.retrievers.bm25_retriever.BM25sRetriever`,
                      where a model promoted before components/ was grouped names `components.bm25_retriever...`),
                      the pipeline's `model_slots` (before specs declared them, the slots of LEGACY_MODEL_SLOTS
                      its pipeline has) and `models.kind` (before the key: an endpoint's when the generator has a
                      `base_url`)

A run logged before any of these config changes is promoted into the current format: `write_bundle` passes its
config through `current_config`.
"""

from __future__ import annotations

import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cache
from typing import Any

from omegaconf import OmegaConf

from experiments.runs.settings import STORE_KINDS, StoreSettings
from pipelines.access import IndexAccess
from pipelines.errors import UserError
from pipelines.run_layout import ACCESS_FILE

BUNDLE_FORMAT = 2
FORMAT_KEY = "bundle_format"  # in identities.json
# The LLM slots every pipeline had before specs declared `model_slots`: slot -> (config section, component).
LEGACY_MODEL_SLOTS = {
    "reranker": ("reranker", "reranker"),
    "rewriter": ("rewriter", "rewriter"),
    "router": ("router", "router"),
    "router_llm": ("router.llm", "router"),
    "route_decompose": ("router.routes.decompose", "decomposer"),
    "route_multi_step": ("router.routes.multi_step", "planner"),
}


@dataclass(frozen=True)
class RawBundle:
    """A bundle's files as read, in the format they were written in. `snapshot_access` reads who may see what from
    the index snapshot's chunks, for a bundle without access.json; `where` names the bundle in messages."""

    where: str
    identities: dict[str, Any]
    config: str  # config.yaml: the run's portable config
    access: IndexAccess | None  # access.json; None where absent
    snapshot_access: Callable[[], IndexAccess]


@dataclass(frozen=True)
class CurrentBundle:
    """A bundle's files in the current format."""

    identities: dict[str, Any]  # index_fingerprint, models, index_files, bundle_format
    config: str
    access: IndexAccess


def upgrade(raw: RawBundle) -> CurrentBundle:
    """`raw` in the current format: each step from the format it records on, in order."""
    found = int(raw.identities.get(FORMAT_KEY, 1))
    if found > BUNDLE_FORMAT:
        raise UserError(
            f"{raw.where} has bundle format {found}, newer than this ragtune reads ({BUNDLE_FORMAT}): install the "
            "ragtune version that promoted it"
        )
    for step in STEPS[found - 1 :]:
        raw = step(raw)
    if raw.access is None:
        raise UserError(f"{raw.where} is damaged: {ACCESS_FILE} is missing")
    return CurrentBundle(raw.identities, raw.config, raw.access)


def current_config(portable: str) -> str:
    """A run's portable config as this ragtune reads it: the same text where nothing in it is older."""
    config = OmegaConf.to_container(OmegaConf.create(portable), resolve=False)
    current = _with_models_kind(_with_model_slots(_grouped_targets(config)))
    return portable if current == config else OmegaConf.to_yaml(OmegaConf.create(current))


# Factories a config names by `_target_` that moved since: the old path -> the new one.
MOVED_TARGETS = {"pipelines.weaviate_store.weaviate_document_store": "pipelines.index.weaviate.weaviate_document_store"}


@cache
def component_groups() -> dict[str, str]:
    """Each module of components/ -> the group folder it lives in (`bm25_retriever` -> `retrievers`)."""
    import components

    root = components.__path__
    return {
        module.name: group.name
        for group in pkgutil.iter_modules(root)
        if group.ispkg
        for module in pkgutil.iter_modules([f"{root[0]}/{group.name}"])
    }


def current_target(target: str) -> str:
    """`components.<module>.<Class>` as `components.<group>.<module>.<Class>`, a factory that moved (MOVED_TARGETS)
    where it lives now; any other target as it is."""
    if target in MOVED_TARGETS:
        return MOVED_TARGETS[target]
    parts = target.split(".")
    if len(parts) > 2 and parts[0] == "components" and parts[1] in component_groups():
        return ".".join(["components", component_groups()[parts[1]], *parts[1:]])
    return target


def _format_1_to_2(raw: RawBundle) -> RawBundle:
    config = current_config(raw.config)
    access = raw.access if raw.access is not None else _snapshot_access(raw, config)
    identities = {"index_files": {}, **raw.identities, FORMAT_KEY: 2}
    return replace(raw, identities=identities, config=config, access=access)


STEPS: tuple[Callable[[RawBundle], RawBundle], ...] = (_format_1_to_2,)


def _snapshot_access(raw: RawBundle, config: str) -> IndexAccess:
    """A snapshot in memory holds every chunk with its document's meta; a server's collection is not shipped."""
    store = OmegaConf.create(config).get("store") or {}
    if STORE_KINDS.get(store.get("kind"), StoreSettings).server_side:
        raise UserError(
            f"index {raw.identities['index_fingerprint']} lives on a server and its bundle records no access.json "
            "(promoted before ragtune recorded who may see what): promote its run again"
        )
    return raw.snapshot_access()


def _grouped_targets(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            key: current_target(item) if key == "_target_" and isinstance(item, str) else _grouped_targets(item)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_grouped_targets(item) for item in value]
    return value


def _with_model_slots(config: dict[str, Any]) -> dict[str, Any]:
    pipeline = config.get("pipeline")
    if not isinstance(pipeline, dict) or pipeline.get("model_slots") is not None:
        return config
    components = pipeline.get("components")
    present = set(components) if isinstance(components, dict) else set()
    slots = {
        slot: {"section": section, "component": component}
        for slot, (section, component) in LEGACY_MODEL_SLOTS.items()
        if component in present
    }
    return config | {"pipeline": pipeline | {"model_slots": slots}}


def _with_models_kind(config: dict[str, Any]) -> dict[str, Any]:
    models = config.get("models")
    if not isinstance(models, dict) or models.get("kind") is not None:
        return config
    generator = models.get("generator")
    kind = "endpoint" if isinstance(generator, dict) and generator.get("base_url") else "local"
    return config | {"models": models | {"kind": kind}}
