"""Config resolvers and early validation: a bad key fails before any indexing, naming the key."""

from __future__ import annotations

import difflib
import os
import re
import sys
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import TypeVar

from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from components.joiners.rank_fusion_joiner import MODES
from experiments.datasets.settings import KINDS as DATASET_KINDS
from experiments.datasets.settings import dataset_settings
from experiments.evaluation.settings import EvalSettings, JudgeSettings
from experiments.runs.model_settings import MODEL_KINDS
from experiments.runs.settings import (
    STORE_KINDS,
    CragSettings,
    IngestSettings,
    MlflowSettings,
    RetrieverSettings,
    SelfCheckSettings,
)
from pipelines.errors import ConfigError, UserError
from pipelines.fusion_fit import KINDS as FIT_KINDS
from pipelines.models import resolve_model

T = TypeVar("T")


PROJECT_DIR = Path(__file__).resolve().parents[2]
CONF_DIR = PROJECT_DIR / "conf"
CRAG_ACTIONS = ("refuse", "search")
CONFIG_GROUPS = frozenset(path.name for path in CONF_DIR.iterdir() if path.is_dir())
# Top-level keys a user may add with `+key=...` although no file declares them.
OPTIONAL_SECTIONS = frozenset({"compare"})

# Config group -> its records by the name conf/<group>/*.yaml extend them as; top-level section -> its record
# (stored as `<section>_schema`, listed in the primary config's defaults).
GROUP_SCHEMAS: dict[str, dict[str, type]] = {
    "dataset": {f"schema_{kind}": record for kind, record in DATASET_KINDS.items()},  # one record per kind
    "retriever": {"schema": RetrieverSettings},
    "eval": {"schema": EvalSettings},
    "eval/judge": {"schema": JudgeSettings},
    "ingest": {"schema": IngestSettings},
    "selfcheck": {"schema": SelfCheckSettings},
    "models": {f"schema_{kind}": record for kind, record in MODEL_KINDS.items()},
    "crag": {"schema": CragSettings},
    "store": {f"schema_{kind}": record for kind, record in STORE_KINDS.items()},
}
SECTION_SCHEMAS: dict[str, type] = {"mlflow": MlflowSettings}


def register_config(sections: Mapping[str, type] = SECTION_SCHEMAS) -> None:
    """What composing conf/ needs: the resolvers and the records the YAML files extend."""
    register_resolvers()
    register_schemas(sections)


def register_resolvers() -> None:
    """`${model_path:REF}` turns a model reference into a local folder (or a clear error); `${pid:}` names job
    folders; `${project_path:data/...}` is a file shipped with ragtune, wherever the run starts from."""
    if not OmegaConf.has_resolver("model_path"):
        OmegaConf.register_new_resolver("model_path", resolve_model)
    if not OmegaConf.has_resolver("pid"):
        OmegaConf.register_new_resolver("pid", os.getpid)
    if not OmegaConf.has_resolver("project_path"):
        OmegaConf.register_new_resolver("project_path", lambda relative: str(PROJECT_DIR / relative))


def compose(
    overrides: Sequence[str] = (), config_name: str = "config", sections: Mapping[str, type] = SECTION_SCHEMAS
) -> DictConfig:
    """The config `python run.py OVERRIDES...` would run (or `ragtune serve`'s, `config_name="serve"` with its
    `sections`), for tools that run outside Hydra's entry point."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    register_config(sections)
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return hydra_compose(config_name, overrides=list(overrides))


def register_schemas(sections: Mapping[str, type] = SECTION_SCHEMAS) -> None:
    """Puts the records into Hydra's ConfigStore, where the YAML files that extend them find them."""
    store = ConfigStore.instance()
    for group, records in GROUP_SCHEMAS.items():
        for name, record in records.items():
            store.store(group=group, name=name, node=record)
    for section, schema in sections.items():
        store.store(name=f"{section}_schema", node=schema, package=section)


def typed(cfg: DictConfig, key: str, schema: type[T]) -> T:
    """`cfg.<key>` as its record, also for a config Hydra did not compose (a promoted bundle's); a wrong value
    fails naming its key."""
    try:
        values = OmegaConf.to_container(OmegaConf.select(cfg, key, throw_on_missing=True), resolve=True)
        return OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(schema), values))  # type: ignore[return-value]
    except OmegaConfBaseException as e:
        if (cause := _user_error_behind(e)) is not None:  # a resolver's own one-line error (an unavailable model)
            raise cause from None
        full_key = e.full_key if str(e.full_key).startswith(f"{key}.") else f"{key}.{e.full_key}".rstrip(".")
        raise ConfigError(f"config key '{full_key}': {str(e.msg).splitlines()[0]}") from None


def _user_error_behind(error: BaseException) -> UserError | None:
    while error is not None and not isinstance(error, UserError):
        error = error.__cause__ or error.__context__  # type: ignore[assignment]
    return error


def validate(cfg: DictConfig) -> None:
    """Type-checks the plain sections against their schemas and cross-checks values."""
    _check_top_level_keys(cfg)
    sections = {group.replace("/", "."): records.get("schema") for group, records in GROUP_SCHEMAS.items()}
    for key, record in (sections | SECTION_SCHEMAS).items():
        if OmegaConf.select(cfg, key) is None:
            if key == "eval.judge":  # none unless chosen
                continue
            raise ConfigError(f"config section '{key}' is missing")
        if key == "dataset":  # typed per kind, with the dataset's own errors
            dataset_settings(cfg.dataset)
        elif record is None:  # typed per kind
            typed(cfg, key, _record_of_kind(key, str(OmegaConf.select(cfg, f"{key}.kind"))))
        else:
            typed(cfg, key, record)
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
    action = cfg.crag.incorrect_action  # read inside a router template, where a typo would silently mean "refuse"
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


def _record_of_kind(key: str, kind: str) -> type:
    records = GROUP_SCHEMAS[key]
    if f"schema_{kind}" not in records:
        kinds = ", ".join(name.removeprefix("schema_") for name in records)
        raise ConfigError(f"config key '{key}.kind': unknown kind {kind!r} (valid: {kinds})")
    return records[f"schema_{kind}"]


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
    return CONFIG_GROUPS | declared | OPTIONAL_SECTIONS | set(SECTION_SCHEMAS)


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
