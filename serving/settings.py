"""The `serve` section of conf/serve.yaml as a typed record, read the same way by serve.py and by the pyfunc model
(which takes its overrides from `$RAGTUNE_SERVE`, since `mlflow models serve` passes it no arguments)."""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from experiments.runs.config import ConfigError, compose

# `mlflow models serve` runs the pyfunc model with no arguments: its serve.* overrides come from here.
SERVE_ENV = "RAGTUNE_SERVE"
# serve.anonymous: what a request without credentials gets.
ANONYMOUS = ("refuse", "public")


@dataclass
class JwtSettings:
    """`serve.jwt`: how a signed token's claims become a principal."""

    # HS256/384/512: the shared secret; RS*, ES*, PS*, EdDSA: the issuer's public key (PEM).
    key_file: str | None = None
    algorithms: list[str] = field(default_factory=lambda: ["RS256"])
    audience: str | None = None
    issuer: str | None = None
    tenant_claim: str = "tenant"
    groups_claim: str = "groups"
    leeway_s: float = 0.0


@dataclass
class ServeSettings:
    """A wrong type fails here, naming the key, before anything loads."""

    host: str = "127.0.0.1"
    port: int = 8080
    auth: str = "api_keys"
    api_keys_file: str | None = None
    jwt: JwtSettings = field(default_factory=JwtSettings)
    trust_proxy: bool = False
    # A request without credentials: refused (401), or answered from public documents only.
    anonymous: str = "refuse"
    # Metadata fields a client may filter on; null: any `meta.*` field.
    filter_fields: list[str] | None = None
    max_body_bytes: int = 1 << 20
    max_pending: int = 8
    timeout_s: float = 60.0
    max_question_chars: int = 2000
    max_history_turns: int = 20
    max_history_chars: int = 20000
    debug: bool = False
    autolog: bool = False
    trace_experiment: str = "ragtune-serve"


def serve_settings(cfg: DictConfig) -> ServeSettings:
    try:
        merged = OmegaConf.merge(OmegaConf.structured(ServeSettings), cfg.serve)
    except OmegaConfBaseException as e:
        raise ConfigError(f"config key 'serve.{e.full_key}': {str(e.msg).splitlines()[0]}") from None
    settings: ServeSettings = OmegaConf.to_object(merged)
    if settings.anonymous not in ANONYMOUS:
        raise ConfigError(f"config key 'serve.anonymous': must be one of {list(ANONYMOUS)}, got {settings.anonymous!r}")
    return settings


def env_settings() -> ServeSettings:
    """conf/serve.yaml with the overrides in `$RAGTUNE_SERVE` (e.g. "serve.api_keys_file=keys.yaml")."""
    overrides = shlex.split(os.environ.get(SERVE_ENV, ""))
    try:
        cfg = compose(overrides, config_name="serve")
    except Exception as e:  # Hydra's override grammar errors: said with where they came from
        raise ConfigError(f"${SERVE_ENV}: {e}") from None
    return serve_settings(cfg)
