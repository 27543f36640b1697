"""Config resolvers and early validation: a bad key fails before any indexing, naming the key."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from components.rank_fusion_joiner import MODES
from components.text import LANGUAGES
from experiments.models import resolve_model


class ConfigError(ValueError):
    """A config value that cannot work; the message names the key."""


def register_resolvers() -> None:
    """`${model_path:REF}` turns a model reference into a local folder (or a clear error)."""
    if not OmegaConf.has_resolver("model_path"):
        OmegaConf.register_new_resolver("model_path", resolve_model)


@dataclass
class Bm25Schema:
    k1: float = 1.5
    b: float = 0.75
    method: str = "lucene"
    stopwords: str | None = None


@dataclass
class FusionSchema:
    mode: str = "dbsf"
    agreement_bonus: float = 0.2
    rrf_k: float = 60.0
    weights: dict[str, float] = field(default_factory=dict)
    min_scores: dict[str, float] = field(default_factory=dict)
    unfit_weight: float = 0.0


@dataclass
class RetrieverSchema:
    top_k: int = 20
    candidates: int = 50
    bm25: Bm25Schema = field(default_factory=Bm25Schema)
    fusion: FusionSchema = field(default_factory=FusionSchema)


@dataclass
class JudgeSchema:
    model: str = "gpt-4o-mini"
    base_url: str = "https://api.openai.com/v1"
    api_key_env: str | None = "OPENAI_API_KEY"
    timeout: float = 60.0
    max_retries: int = 2
    max_tokens: int = 512


@dataclass
class EvalSchema:
    ks: list[int] = field(default_factory=lambda: [1, 3, 5, 10, 20, 50])
    min_overlap: float = 0.5
    pass_f1: float = 0.5
    redundancy_threshold: float = 0.9
    confidence: float = 0.95
    judge: JudgeSchema | None = None


@dataclass
class MlflowSchema:
    tracking_uri: str = "sqlite:///mlruns/mlflow.db"
    artifact_root: str = "mlruns/artifacts"
    experiment: str | None = None


@dataclass
class IngestSchema:
    name: str = "recursive"
    chunk_size: int = 500
    chunk_overlap: int = 50
    separators: list[str] = field(default_factory=list)
    heading_prefix: bool = False
    cache_dir: str = ".cache/ragtune/index"
    chain: list[str] = field(default_factory=list)
    splitters: dict[str, Any] = field(default_factory=dict)


SCHEMAS = {
    "retriever": RetrieverSchema,
    "eval": EvalSchema,
    "mlflow": MlflowSchema,
    "ingest": IngestSchema,
}


def validate(cfg: DictConfig) -> None:
    """Type-checks the plain sections against their schemas and cross-checks values."""
    for section, schema in SCHEMAS.items():
        if section not in cfg:
            raise ConfigError(f"config section '{section}' is missing")
        try:
            OmegaConf.merge(OmegaConf.structured(schema), cfg[section])
        except OmegaConfBaseException as e:
            raise ConfigError(f"config key '{section}.{e.full_key}': {e.msg}") from e
    _require(cfg.dataset.get("language") in LANGUAGES, "dataset.language", f"must be one of {sorted(LANGUAGES)}")
    _require("kind" in cfg.dataset and "name" in cfg.dataset, "dataset", "needs 'name' and 'kind'")
    ks = list(cfg.eval.ks)
    _require(bool(ks) and all(k > 0 for k in ks), "eval.ks", f"must be positive integers, got {ks}")
    _require(0 < cfg.eval.min_overlap <= 1, "eval.min_overlap", "must be in (0, 1]")
    _require(0 <= cfg.eval.pass_f1 <= 1, "eval.pass_f1", "must be in [0, 1]")
    _require(0 < cfg.eval.redundancy_threshold <= 1, "eval.redundancy_threshold", "must be in (0, 1]")
    _require(0 < cfg.eval.confidence < 1, "eval.confidence", "must be in (0, 1)")
    _require(cfg.retriever.top_k > 0, "retriever.top_k", "must be > 0")
    _require(cfg.retriever.candidates > 0, "retriever.candidates", "must be > 0")
    _require(cfg.retriever.fusion.mode in MODES, "retriever.fusion.mode", f"must be one of {sorted(MODES)}")
    _require(cfg.retriever.fusion.agreement_bonus >= 0, "retriever.fusion.agreement_bonus", "must be >= 0")
    _require(cfg.retriever.fusion.rrf_k > 0, "retriever.fusion.rrf_k", "must be > 0")
    _require(cfg.ingest.chunk_size > 0, "ingest.chunk_size", "must be > 0")
    _require(
        0 <= cfg.ingest.chunk_overlap < cfg.ingest.chunk_size,
        "ingest.chunk_overlap",
        f"must be >= 0 and < ingest.chunk_size ({cfg.ingest.chunk_size})",
    )
    _require(bool(cfg.ingest.chain), "ingest.chain", "must name at least one splitter")
    missing = [name for name in cfg.ingest.chain if name not in cfg.ingest.splitters]
    _require(not missing, "ingest.chain", f"names splitters {missing} not defined under ingest.splitters")


def _require(ok: bool, key: str, message: str) -> None:
    if not ok:
        raise ConfigError(f"config key '{key}': {message}")
