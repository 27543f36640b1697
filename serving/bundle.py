"""A promoted run as a folder (a *bundle*): what `serving.promote` ships inside an MLflow model, and what
`serve.py` and `mlflow models serve` load.

    config.yaml            the run's portable config (experiments/runs/portable.py), read to rebuild the pipeline
    config.resolved.yaml   the run's resolved config, for the record
    pipeline.yaml          the Haystack pipeline the run logged, for the record
    identities.json        the bundle's format, the index fingerprint, every model's identity as the run recorded
                           them, and the size of every file of the index snapshot
    access.json            who may see each document of the index (pipelines/access.py)
    index/<fingerprint>/   the index snapshot: chunks, embeddings, manifest, and the BM25 index beside them; for
                           store=weaviate only the manifest of the collection build the run evaluated
    files/                 the project files the config reads (`${project_path:...}`), e.g. the k-NN examples

Loading refuses a bundle whose models are not the ones evaluated (another package version, a retrained grader), or
whose files are not all there, so what is served is what was measured. Nothing writes into a bundle once promoted;
a bundle of an older format is read through serving/bundle_compat.py, which brings it to the current one.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mlflow
from mlflow.entities import Run
from mlflow.models import Model
from mlflow.tracking import MlflowClient
from omegaconf import OmegaConf

from experiments.runs.config import PROJECT_DIR, register_config, validate
from experiments.runs.portable import project_files, relocated
from experiments.runs.run_settings import RunSettings
from pipelines.access import IndexAccess, file_digest
from pipelines.errors import ConfigError, UserError
from pipelines.index.snapshot import LAST_USED, MANIFEST, DamagedIndexError, read_chunks
from pipelines.run_layout import (
    ACCESS_FILE,
    CONFIG_ARTIFACT,
    INDEX_FINGERPRINT_TAG,
    MODEL_TAG_PREFIX,
    PIPELINE_ARTIFACT,
    PORTABLE_CONFIG,
)
from serving.bundle_compat import BUNDLE_FORMAT, FORMAT_KEY, RawBundle, current_config, upgrade

CONFIG, RESOLVED, PIPELINE, IDENTITIES, INDEX, FILES = (
    "config.yaml", "config.resolved.yaml", "pipeline.yaml", "identities.json", "index", "files",
)
MLMODEL = "MLmodel"
# Identities the run records but serving does not run: the LLM judge scores, it does not answer.
NOT_SERVED = {"judge"}


class PromotionError(UserError):
    """A run that cannot be promoted, or a bundle that cannot be served as evaluated; the message says why."""


@dataclass(frozen=True)
class Bundle:
    """A bundle read back and checked: its settings (paths relocated into the bundle), the recorded identities, the
    index snapshot folder, and who may see which document."""

    folder: Path
    settings: RunSettings
    models: dict[str, str]
    index: Path
    access: IndexAccess


def write_bundle(client: MlflowClient, run: Run, out: Path) -> dict[str, Any]:
    """Fills `out` with the run's bundle; returns identities.json's content."""
    run_id = run.info.run_id
    logged = {artifact.path for artifact in client.list_artifacts(run_id)}
    portable = _artifact_text(client, run_id, logged, PORTABLE_CONFIG)
    resolved = _artifact_text(client, run_id, logged, CONFIG_ARTIFACT)
    fingerprint = run.data.tags.get(INDEX_FINGERPRINT_TAG)
    if not fingerprint:
        raise PromotionError(
            f"run {run_id} recorded no index (tag {INDEX_FINGERPRINT_TAG}): it did not finish indexing"
        )
    out.mkdir(parents=True, exist_ok=True)
    (out / CONFIG).write_text(current_config(portable), encoding="utf-8")
    (out / RESOLVED).write_text(resolved, encoding="utf-8")
    (out / PIPELINE).write_text(_artifact_text(client, run_id, logged, PIPELINE_ARTIFACT), encoding="utf-8")
    cache_dir = Path(OmegaConf.create(resolved).ingest.cache_dir)
    index = out / INDEX / fingerprint
    _copy_snapshot(cache_dir / fingerprint, index, run_id)
    for relative in project_files(portable):
        source = PROJECT_DIR / relative
        if not source.is_file():
            raise PromotionError(f"run {run_id} reads {relative} (config ${{project_path:{relative}}}), which is gone")
        (out / FILES / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, out / FILES / relative)
    if ACCESS_FILE in logged:
        shutil.copy2(client.download_artifacts(run_id, ACCESS_FILE), out / ACCESS_FILE)
    else:  # a run logged before runs recorded access: read it from the snapshot it served
        snapshot_access(index, _meta_file_digest(OmegaConf.select(OmegaConf.create(resolved), "dataset.meta_file"))).write(out / ACCESS_FILE)
    prefix = MODEL_TAG_PREFIX
    models = {key.removeprefix(prefix): value for key, value in run.data.tags.items() if key.startswith(prefix)}
    identities = {
        FORMAT_KEY: BUNDLE_FORMAT,
        "index_fingerprint": fingerprint,
        "models": {k: v for k, v in models.items() if k not in NOT_SERVED},
        "index_files": {str(f.relative_to(index)): f.stat().st_size for f in sorted(index.rglob("*")) if f.is_file()},
    }
    (out / IDENTITIES).write_text(json.dumps(identities, indent=2, sort_keys=True), encoding="utf-8")
    return identities


def download_bundle(model_uri: str) -> Path:
    """The bundle folder of a promoted model (`models:/NAME@ALIAS`, `runs:/RUN/ragtune`), downloaded by MLflow."""
    local = Path(mlflow.artifacts.download_artifacts(artifact_uri=model_uri))
    try:
        flavor = Model.load(local / MLMODEL).flavors["python_function"]
        return local / flavor["artifacts"]["bundle"]["path"]
    except (OSError, KeyError, TypeError):
        raise PromotionError(f"{model_uri} is not a model promoted by ragtune (no bundle in its MLmodel)") from None


def read_bundle(folder: Path) -> Bundle:
    """The bundle in `folder`, with every file it records present at its recorded size; else one PromotionError
    naming what is missing."""
    register_config()
    try:
        identities = json.loads((folder / IDENTITIES).read_text(encoding="utf-8"))
        portable = (folder / CONFIG).read_text(encoding="utf-8")
    except FileNotFoundError as e:
        raise PromotionError(f"{folder} is not a ragtune bundle: {Path(e.filename).name} is missing") from None
    index = folder / INDEX / identities["index_fingerprint"]
    access = IndexAccess.read(folder / ACCESS_FILE) if (folder / ACCESS_FILE).is_file() else None
    bundle = upgrade(RawBundle(f"bundle {folder}", identities, portable, access, lambda: snapshot_access(index)))
    settings = validate(relocated(bundle.config, folder / FILES))
    for relative, size in bundle.identities["index_files"].items():
        file = index / relative
        if not file.is_file() or file.stat().st_size != size:
            state = "is missing" if not file.is_file() else f"has {file.stat().st_size} bytes, not {size}"
            raise PromotionError(f"bundle {folder} is damaged: {file.relative_to(folder)} {state}")
    return Bundle(folder, settings, bundle.identities["models"], index, bundle.access)


def snapshot_access(index: Path, meta_file: str | None = None) -> IndexAccess:
    """Who may see what, read from the chunks of an index snapshot (each chunk carries its document's meta)."""
    try:
        chunks = read_chunks(index)
    except DamagedIndexError as e:
        raise PromotionError(f"index snapshot {index}: {e}") from None
    return IndexAccess.of(((chunk.meta.get("doc_id", chunk.id), chunk.meta) for chunk in chunks), meta_file)


def _meta_file_digest(meta_file: str | None) -> str | None:
    return file_digest(Path(meta_file)) if meta_file and Path(meta_file).is_file() else None


def _artifact_text(client: MlflowClient, run_id: str, logged: set[str], name: str) -> str:
    if name not in logged:
        hint = " (runs logged before ragtune wrote portable configs: rerun the config)" if name == PORTABLE_CONFIG else ""
        raise PromotionError(f"run {run_id} has no artifact {name}{hint}")
    return Path(client.download_artifacts(run_id, name)).read_text(encoding="utf-8")


def _copy_snapshot(source: Path, target: Path, run_id: str) -> None:
    if not (source / MANIFEST).is_file():
        raise PromotionError(
            f"run {run_id}'s index snapshot {source} is not in the index cache (cleaned, or the run used another "
            f"paths.cache): rerun the run's config from the same folder to rebuild it (same fingerprint), then promote"
        )
    shutil.copytree(source, target, ignore=shutil.ignore_patterns(LAST_USED, ".*"))


def check_identities(recorded: Mapping[str, str], here: Mapping[str, str]) -> None:
    """Every model the run recorded must be the one this machine loads, slot by slot."""
    differ = [
        f"{slot}: the run evaluated {recorded.get(slot, 'none')}, this machine loads {here.get(slot, 'none')}"
        for slot in sorted(set(recorded) | set(here))
        if recorded.get(slot) != here.get(slot)
    ]
    if differ:
        raise ConfigError(
            "the promoted models are not the ones installed here (install the model's pinned requirements): "
            + "; ".join(differ)
        )
