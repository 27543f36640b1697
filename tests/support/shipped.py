"""Components exactly as the shipped config tree builds them, for tests that check what users get."""

from typing import Any

from hydra import compose, initialize_config_dir
from omegaconf import DictConfig, OmegaConf

from experiments.runs.config import register_resolvers
from pipelines.instantiate import instantiate_component
from tests.support.paths import CONF


def composed(*overrides: str) -> DictConfig:
    """conf/config.yaml composed with command-line style overrides, as run.py composes it."""
    register_resolvers()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose("config", overrides=list(overrides))


def shipped(overrides: list[str], key: str, resources: dict[str, Any] | None = None) -> tuple[Any, DictConfig]:
    """The component at config `key` as conf/ builds it with `overrides`, warmed up, and the composed config."""
    cfg = composed(*overrides)
    instance = instantiate_component(OmegaConf.select(cfg, key), key, resources or {})
    instance.warm_up()
    return instance, cfg
