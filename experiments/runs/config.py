"""Config resolvers and early validation: a bad key fails before any indexing, naming the key."""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
import sys
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from components.common.paths import PROJECT_DIR
from experiments.datasets.settings import KINDS as DATASET_KINDS
from experiments.datasets.settings import dataset_settings
from experiments.evaluation.settings import EvalSettings, JudgeSettings
from experiments.runs.model_settings import MODEL_KINDS
from experiments.runs.run_settings import RunSettings
from experiments.runs.settings import (
    STORE_KINDS,
    CragSettings,
    IngestSettings,
    MlflowSettings,
    RetrieverSettings,
    SelfCheckSettings,
)
from pipelines.errors import ConfigError, UserError, require
from pipelines.models import resolve_model
from pipelines.spec import PipelineSpec

T = TypeVar("T")


CONF_DIR = PROJECT_DIR / "conf"
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
    fails naming its key, and so does a value the record's own `check()` refuses."""
    try:
        values = OmegaConf.to_container(OmegaConf.select(cfg, key, throw_on_missing=True), resolve=True)
        record = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(schema), values))
    except OmegaConfBaseException as e:
        if (cause := _user_error_behind(e)) is not None:  # a resolver's own one-line error (an unavailable model)
            raise cause from None
        full_key = e.full_key if str(e.full_key).startswith(f"{key}.") else f"{key}.{e.full_key}".rstrip(".")
        raise ConfigError(f"config key '{full_key}': {str(e.msg).splitlines()[0]}") from None
    _check(record)
    return record  # type: ignore[return-value]


def _check(record: Any) -> None:
    """Runs `check()` on a record and on every record inside it, innermost first."""
    if not dataclasses.is_dataclass(record):
        return
    for item in dataclasses.fields(record):
        _check(getattr(record, item.name))
    if callable(check := getattr(record, "check", None)):
        check()


def _user_error_behind(error: BaseException) -> UserError | None:
    while error is not None and not isinstance(error, UserError):
        error = error.__cause__ or error.__context__  # type: ignore[assignment]
    return error


def validate(cfg: DictConfig) -> RunSettings:
    """The run's settings, every section typed by its record (which checks its own values), then cross-checked."""
    _check_top_level_keys(cfg)
    records: dict[str, Any] = {}
    sections = {group.replace("/", "."): group_records.get("schema") for group, group_records in GROUP_SCHEMAS.items()}
    for key, record in (sections | SECTION_SCHEMAS).items():
        if key == "eval.judge":  # part of eval's record, none unless chosen
            continue
        if OmegaConf.select(cfg, key) is None:
            raise ConfigError(f"config section '{key}' is missing")
        if key == "dataset":  # typed per kind, with the dataset's own errors
            records[key] = dataset_settings(cfg.dataset)
        elif record is None:  # typed per kind
            records[key] = typed(cfg, key, _record_of_kind(key, str(OmegaConf.select(cfg, f"{key}.kind"))))
        else:
            records[key] = typed(cfg, key, record)
    records["pipeline"] = typed(cfg, "pipeline", PipelineSpec)
    settings = RunSettings(
        **records,
        objective=_objective(cfg.get("objective"), records["eval"].ks),
        cache=Path(str(cfg.paths.cache)),
        config=cfg,
    )
    _check_order_is_read(settings)
    _check_selfcheck(settings)
    _warn_ks_beyond_depth(settings.eval.ks, settings.retriever.top_k)
    return settings


def _objective(objective: Any, ks: list[int]) -> str:
    require(isinstance(objective, str) and "/" in objective, "objective",
             f"must name a logged metric such as retrieval/mrr_at_10, got {objective!r}")
    cutoff = re.search(r"_at_(\d+)$", objective)
    require(cutoff is None or int(cutoff[1]) in ks, "objective",
             f"{objective} is logged only when eval.ks holds {cutoff[1] if cutoff else ''}; eval.ks is {ks}")
    return objective


def _record_of_kind(key: str, kind: str) -> type:
    records = GROUP_SCHEMAS[key]
    if f"schema_{kind}" not in records:
        kinds = ", ".join(name.removeprefix("schema_") for name in records)
        raise ConfigError(f"config key '{key}.kind': unknown kind {kind!r} (valid: {kinds})")
    return records[f"schema_{kind}"]


def _answer_stage_has(stage: Any, component: str) -> bool:
    components = stage.get("components") if isinstance(stage, Mapping) else None
    return components is not None and component in components


def _check_order_is_read(settings: RunSettings) -> None:
    """A context order that no stage of this pipeline reads would be logged as if it had been measured."""
    order = settings.section("order")
    if order is None or order.get("_target_") == "none":
        return
    require(
        _answer_stage_has(settings.pipeline.answer, "order"),
        "order",
        "only the llm answer stage reads it (answer=llm); span and extractive answers weigh each chunk by its "
        "rank, and a retrieval-only pipeline has no prompt; drop it or set answer=llm",
    )


def _check_selfcheck(settings: RunSettings) -> None:
    """Retries need a generator to retry and a loop bound above them; quoting answerers have neither."""
    retries = settings.selfcheck.max_retries
    if retries == 0:
        return
    require(
        _answer_stage_has(settings.pipeline.answer, "selfcheck"),
        "selfcheck.max_retries",
        "only the llm answer stage retries (answer=llm); span and extractive answers quote the context, so "
        "their sentences are always supported, and a retrieval-only pipeline has no answer",
    )
    bound = settings.pipeline.max_runs_per_component
    require(
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
