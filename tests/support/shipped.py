"""Components exactly as the shipped config tree builds them, for tests that check what users get."""

from typing import Any

from omegaconf import DictConfig, OmegaConf

from experiments.runs.config import compose
from pipelines.instantiate import instantiate_component


def composed(*overrides: str) -> DictConfig:
    """conf/config.yaml composed with command-line style overrides, as run.py composes it."""
    return compose(overrides)


def shipped(overrides: list[str], key: str, resources: dict[str, Any] | None = None) -> tuple[Any, DictConfig]:
    """The component at config `key` as conf/ builds it with `overrides`, warmed up, and the composed config."""
    cfg = composed(*overrides)
    instance = instantiate_component(OmegaConf.select(cfg, key), key, resources or {})
    instance.warm_up()
    return instance, cfg
