"""Config resolvers and early validation: a bad key fails before any indexing, naming the key."""

from __future__ import annotations

import difflib
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from components.common.text import LANGUAGES
from components.joiners.rank_fusion_joiner import MODES
from pipelines.errors import UserError
from pipelines.fusion_fit import KINDS as FIT_KINDS
from pipelines.models import resolve_model


class ConfigError(UserError, ValueError):
    """A config value that cannot work; the message names the key."""


PROJECT_DIR = Path(__file__).resolve().parents[2]
CONF_DIR = PROJECT_DIR / "conf"
CRAG_ACTIONS = ("refuse", "search")
CONFIG_GROUPS = frozenset(path.name for path in CONF_DIR.iterdir() if path.is_dir())
# Top-level keys a user may add with `+key=...` although no file declares them.
OPTIONAL_SECTIONS = frozenset({"compare"})


def register_resolvers() -> None:
    """`${model_path:REF}` turns a model reference into a local folder (or a clear error); `${pid:}` names job
    folders; `${project_path:data/...}` is a file shipped with ragtune, wherever the run starts from."""
    if not OmegaConf.has_resolver("model_path"):
        OmegaConf.register_new_resolver("model_path", resolve_model)
    if not OmegaConf.has_resolver("pid"):
        OmegaConf.register_new_resolver("pid", os.getpid)
    if not OmegaConf.has_resolver("project_path"):
        OmegaConf.register_new_resolver("project_path", lambda relative: str(PROJECT_DIR / relative))


def compose(overrides: Sequence[str] = (), config_name: str = "config") -> DictConfig:
    """The config `python run.py OVERRIDES...` would run (or serve.py's, `config_name="serve"`), for tools that
    run outside Hydra's entry point."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    register_resolvers()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return hydra_compose(config_name, overrides=list(overrides))


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
    confidence: str | None = None
    confidence_strength: float = 0.0
    fit: str | None = None
    fit_queries: str = "sentence"


@dataclass
class RetrieverSchema:
    top_k: int = 20
    candidates: int = 50
    filters: Any = None  # a Haystack filter: checked by the retrievers when they are built
    filter_policy: str = "merge"
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
    ks: list[int] = field(default_factory=lambda: [1, 3, 5, 10, 20])
    min_overlap: float = 0.5
    pass_f1: float = 0.5
    redundancy_threshold: float = 0.9
    confidence: float = 0.95
    trace_sample: int = 20
    trace_full: bool = False
    judge: JudgeSchema | None = None


@dataclass
class MlflowSchema:
    tracking_uri: str | None = None
    artifact_root: str | None = None
    experiment: str | None = None


@dataclass
class IngestSchema:
    name: str = "recursive"
    chunk_size: int = 500
    chunk_overlap: int = 50
    separators: list[str] = field(default_factory=list)
    heading_prefix: bool = False
    cache_dir: str = ".cache/ragtune/index"
    update: bool = False
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
    _check_top_level_keys(cfg)
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
    _require(cfg.eval.trace_sample >= 0, "eval.trace_sample", "must be >= 0 (0 turns tracing off)")
    _require(cfg.retriever.top_k > 0, "retriever.top_k", "must be > 0")
    _require(cfg.retriever.candidates > 0, "retriever.candidates", "must be > 0")
    _require(cfg.retriever.fusion.mode in MODES, "retriever.fusion.mode", f"must be one of {sorted(MODES)}")
    _require(cfg.retriever.fusion.agreement_bonus >= 0, "retriever.fusion.agreement_bonus", "must be >= 0")
    _require(cfg.retriever.fusion.rrf_k > 0, "retriever.fusion.rrf_k", "must be > 0")
    _require(cfg.retriever.fusion.get("fit") in (None, "auto"), "retriever.fusion.fit", "must be null or auto")
    _require(cfg.retriever.fusion.get("fit_queries", "sentence") in FIT_KINDS, "retriever.fusion.fit_queries",
             f"must be one of {list(FIT_KINDS)}")
    _require(cfg.ingest.chunk_size > 0, "ingest.chunk_size", "must be > 0")
    if "crag" in cfg:  # read inside a router template, where a typo would silently mean "refuse"
        action = cfg.crag.get("incorrect_action")
        _require(action in CRAG_ACTIONS, "crag.incorrect_action", f"must be one of {list(CRAG_ACTIONS)}, got {action!r}")
    _require(
        0 <= cfg.ingest.chunk_overlap < cfg.ingest.chunk_size,
        "ingest.chunk_overlap",
        f"must be >= 0 and < ingest.chunk_size ({cfg.ingest.chunk_size})",
    )
    _require(bool(cfg.ingest.chain), "ingest.chain", "must name at least one splitter")
    missing = [name for name in cfg.ingest.chain if name not in cfg.ingest.splitters]
    _require(not missing, "ingest.chain", f"names splitters {missing} not defined under ingest.splitters")
    _require(
        isinstance(cfg.get("objective"), str) and "/" in cfg.objective,
        "objective",
        f"must name a logged metric such as retrieval/mrr_at_10, got {cfg.get('objective')!r}",
    )
    cutoff = re.search(r"_at_(\d+)$", cfg.objective)
    _require(
        cutoff is None or int(cutoff[1]) in ks,
        "objective",
        f"{cfg.objective} is logged only when eval.ks holds {cutoff[1] if cutoff else ''}; eval.ks is {ks}",
    )
    _check_order_is_read(cfg)
    _check_selfcheck(cfg)
    _warn_ks_beyond_depth(ks, cfg.retriever.top_k)


def _answer_stage_has(cfg: DictConfig, component: str) -> bool:
    stage = cfg.pipeline.get("answer")
    components = stage.get("components") if isinstance(stage, DictConfig) else None
    return components is not None and component in components


def _check_order_is_read(cfg: DictConfig) -> None:
    """A context order that no stage of this pipeline reads would be logged as if it had been measured."""
    if cfg.get("order") is None or cfg.order.get("_target_") == "none":
        return
    _require(
        _answer_stage_has(cfg, "order"),
        "order",
        "only the llm answer stage reads it (answer=llm); span and extractive answers weigh each chunk by its "
        "rank, and a retrieval-only pipeline has no prompt; drop it or set answer=llm",
    )


def _check_selfcheck(cfg: DictConfig) -> None:
    """Retries need a generator to retry and a loop bound above them; quoting answerers have neither."""
    retries = cfg.get("selfcheck", {}).get("max_retries", 0)
    _require(isinstance(retries, int) and retries >= 0, "selfcheck.max_retries", f"must be an integer >= 0, got {retries!r}")
    if retries == 0:
        return
    _require(
        _answer_stage_has(cfg, "selfcheck"),
        "selfcheck.max_retries",
        "only the llm answer stage retries (answer=llm); span and extractive answers quote the context, so "
        "their sentences are always supported, and a retrieval-only pipeline has no answer",
    )
    bound = cfg.pipeline.get("max_runs_per_component", 100)
    _require(
        retries < bound,
        "selfcheck.max_retries",
        f"must be below pipeline.max_runs_per_component ({bound}), the loop's bound in Haystack",
    )


def _check_top_level_keys(cfg: DictConfig) -> None:
    """`+retriver.top_k=5` would otherwise add a section nothing reads, and the run would ignore it."""
    known = _known_top_level_keys()
    for key in cfg:
        if key not in known:
            close = difflib.get_close_matches(str(key), sorted(known), n=1)
            hint = f"; did you mean '{close[0]}'?" if close else f"; known: {', '.join(sorted(known))}"
            raise ConfigError(f"config key '{key}': unknown top-level key (added with +{key}...?){hint}")


@cache
def _known_top_level_keys() -> frozenset[str]:
    declared = set(OmegaConf.load(CONF_DIR / "config.yaml")) - {"defaults"}
    return CONFIG_GROUPS | declared | OPTIONAL_SECTIONS


def _warn_ks_beyond_depth(ks: list[int], depth: int) -> None:
    beyond = [k for k in ks if k > depth]
    if beyond:
        print(
            f"warning: eval.ks {beyond} exceed the retrieval depth retriever.top_k={depth}: metrics @k for them "
            f"count only the {depth} retrieved documents (recall@{beyond[0]} equals recall@{depth})",
            file=sys.stderr,
        )


def _require(ok: bool, key: str, message: str) -> None:
    if not ok:
        raise ConfigError(f"config key '{key}': {message}")
