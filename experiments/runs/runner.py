"""One job end to end: dataset -> index -> evaluation -> MLflow run + metrics.json + run.json.

The MLflow run opens before any work so that a crash anywhere ends it FAILED with the error attached.
"""

from __future__ import annotations

import dataclasses
import json
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mlflow
import pandas as pd
from haystack import Document
from haystack.document_stores.types import DocumentStore
from mlflow.entities import Dataset as MlflowDataset
from mlflow.entities import DatasetInput, InputTag, RunStatus
from mlflow.tracking import MlflowClient
from mlflow.utils.mlflow_tags import MLFLOW_DATASET_CONTEXT
from omegaconf import DictConfig, OmegaConf

from components.common.pass_through import PassThrough
from experiments.comparison.significance import ci_note
from experiments.datasets import Dataset
from experiments.datasets.golden.items import GoldenItem
from experiments.evaluation.answer_metrics import Similarity, ragas_embeddings
from experiments.evaluation.diagnosis import diagnosis_markdown
from experiments.evaluation.evaluate import Evaluation, evaluate, evidence_doc_ids
from experiments.evaluation.judge import openai_compatible_judge
from experiments.evaluation.report import print_results, print_skipped_files
from experiments.evaluation.routing_metrics import write_confusion
from experiments.runs.config import register_config, validate
from experiments.runs.identities import identity_tags, slot_models
from experiments.runs.indexed import prepare_pipeline
from experiments.runs.job_metrics import (
    CACHE_HIT,
    CHUNKS,
    EVAL_SECONDS,
    INDEX_SECONDS,
    MODEL_LOAD_SECONDS,
    SKIPPED_FILES,
)
from experiments.runs.model_settings import EmbedderSettings
from experiments.runs.portable import portable_config
from experiments.runs.run_settings import RunSettings
from experiments.runs.sweep import ParentRun, job_tags, override_key_value, short_labels
from experiments.runs.tracking import (
    connect,
    experiment_name,
    log_config_params,
    run_tags,
    source_tags,
    use_experiment,
)
from pipelines.access import IndexAccess, file_digest
from pipelines.built import BuiltPipeline
from pipelines.errors import ConfigError
from pipelines.index import IndexInfo
from pipelines.instantiate import instantiate_component
from pipelines.models import check_endpoint
from pipelines.run_layout import (
    ACCESS_FILE,
    CI_NOTE_TAG,
    CONFIG_ARTIFACT,
    CORPUS_FINGERPRINT_TAG,
    DATASET_FINGERPRINT_TAG,
    DATASET_SOURCE_ARTIFACT,
    DATASET_TAG,
    DIAGNOSIS_SUMMARY,
    DIAGNOSIS_TABLE,
    ERROR_ARTIFACT,
    ERROR_TAG,
    GOLDEN_FINGERPRINT_TAG,
    INDEX_COLLECTION_TAG,
    INDEX_FINGERPRINT_TAG,
    INDEX_REBUILT_TAG,
    INDEX_UPDATED_FROM_TAG,
    LANGUAGE_TAG,
    PER_QUESTION_TABLE_ARTIFACT,
    PIPELINE_ARTIFACT,
    PIPELINE_TAG,
    PORTABLE_CONFIG,
    SKIPPED_FILES_ARTIFACT,
    STORE_URL_TAG,
    JobFolder,
    tokenizer_tag,
)
from pipelines.views import STAGE_PREFIX

# Where a run is stored, not what it measures: kept in the overrides tag, left out of run names.
UNNAMED_SECTIONS = ("paths.", "mlflow.", "objective")
# Evidence documents per filtered lookup: at the 400-chunk documents of a long PDF corpus, 16 stay under 9,999.
EVIDENCE_BATCH = 16



@dataclass(frozen=True)
class JobResult:
    run_id: str
    experiment: str
    metrics: dict[str, float]
    objective: float


@dataclass(frozen=True)
class JobIdentity:
    """How a job shows in the MLflow UI: a short name, and the full override string kept as a tag."""

    run_name: str
    tags: dict[str, str]


def job_identity(
    cfg: DictConfig, overrides: list[str], job_num: int | None = None, swept: tuple[str, ...] | None = None
) -> JobIdentity:
    """The pipeline name plus the swept values (or, outside a sweep, every override), paths cut to their last part.

    The full override string is kept as a tag.
    """
    name = str(OmegaConf.select(cfg, "pipeline.name", default="job"))
    shown = [
        o
        for o in overrides
        if (key := override_key_value(o)[0]) != "pipeline"
        and (key in swept if swept is not None else not key.startswith(UNNAMED_SECTIONS))
    ]
    return JobIdentity(f"{name} {short_labels([shown])[0]}" if shown else name, job_tags(job_num, overrides))


def objective(metrics: dict[str, float], name: str) -> float:
    """The metric a sweeper optimises; a missing one fails rather than letting an optimiser chase a constant."""
    if name not in metrics:
        close = [m for m in sorted(metrics) if m.split("/")[0] == name.split("/")[0]][:8]
        raise ConfigError(f"config key 'objective': this run logged no metric '{name}' (logged, e.g.: {close})")
    return metrics[name]


def run_job(
    cfg: DictConfig, job_dir: Path, identity: JobIdentity | None = None, parent: ParentRun | None = None
) -> JobResult:
    """Runs one job; inside a sweep the run is a child of `parent`, in the parent's experiment.

    The run opens before validation, so even a bad sweep point is recorded as a FAILED child with its error.
    """
    register_config()
    identity = identity or job_identity(cfg, [])
    if parent is None:
        experiment_id = use_experiment(cfg.mlflow, experiment_name(cfg))
    else:
        connect(cfg.mlflow.tracking_uri)
        experiment_id = parent.experiment_id
    experiment = mlflow.get_experiment(experiment_id).name
    tags = {PIPELINE_TAG: str(OmegaConf.select(cfg, "pipeline.name", default="?"))}
    tags |= source_tags() | run_tags() | identity.tags
    with mlflow.start_run(
        experiment_id=experiment_id,
        run_name=identity.run_name,
        parent_run_id=parent.run_id if parent else None,
        tags=tags,
    ) as run:
        try:
            settings = validate(cfg)
            log_config_params(run.info.run_id, cfg)
            mlflow.log_text(OmegaConf.to_yaml(cfg, resolve=True), CONFIG_ARTIFACT)
            mlflow.log_text(portable_config(cfg), PORTABLE_CONFIG)  # what promotion ships
            metrics = _run(settings, job_dir, run.info.run_id, experiment)
            score = objective(metrics, settings.objective)
        except BaseException as e:
            mlflow.set_tag(ERROR_TAG, f"{type(e).__name__}: {e}"[:5000])
            mlflow.log_text(traceback.format_exc(), ERROR_ARTIFACT)
            if isinstance(e, KeyboardInterrupt):  # SIGINT, or SIGTERM through run.py: MLflow would say FAILED
                mlflow.end_run(RunStatus.to_string(RunStatus.KILLED))
            raise
    return JobResult(run.info.run_id, experiment, metrics, score)


def _run(run: RunSettings, job_dir: Path, run_id: str, experiment: str) -> dict[str, float]:
    prepared = prepare_pipeline(run)  # an unavailable model or a broken graph fails before any work
    dataset, store, query = prepared.dataset, prepared.store, prepared.query
    mlflow.log_text(query.pipeline.dumps(), PIPELINE_ARTIFACT)

    if query.llm_components:  # an unreachable endpoint fails before indexing
        check_endpoint(dataclasses.asdict(run.models.generator))
    for slot, model in slot_models(run, query).items():
        check_endpoint(model, key=f"{query.model_slots[slot].section}.endpoint")
    embeddings = _answer_embeddings(run.models.embedder, query)
    settings = run.eval
    judge = None
    if embeddings is not None and settings.judge is not None:  # checks its endpoint, also before indexing
        judge = openai_compatible_judge(settings.judge, embeddings)

    index = prepared.index()
    if index.rebuilt_reason:
        mlflow.set_tag(INDEX_REBUILT_TAG, index.rebuilt_reason)
    if index.update is not None:
        mlflow.set_tag(INDEX_UPDATED_FROM_TAG, index.update.base)
    if prepared.server_side:
        mlflow.set_tags({INDEX_COLLECTION_TAG: str(index.path), STORE_URL_TAG: str(getattr(run.store, "url", None))})
    warm_up = prepared.warm_up()
    if prepared.fit is not None:
        mlflow.log_params(prepared.fit.params())
    reads_index = prepared.reads_index()
    index_seconds = index.seconds + sum(s for name, s in warm_up.items() if name in reads_index)
    _tag_identity(dataset, index, query)
    mlflow.set_tags(identity_tags(prepared.models))

    if judge is not None:
        mlflow.set_tags(identity_tags({"judge": judge.identity}))
    similarity = Similarity(embeddings) if embeddings is not None else None
    corpus = {doc.id: doc.content or "" for doc in dataset.documents}
    result = evaluate(query, dataset.golden, settings, evidence_chunks(store, dataset.golden), similarity, judge, corpus=corpus)
    metrics = result.metrics | {
        INDEX_SECONDS: index_seconds,
        MODEL_LOAD_SECONDS: sum(s for name, s in warm_up.items() if name not in reads_index),
        EVAL_SECONDS: result.seconds,
        CACHE_HIT: float(index.cache_hit),
        CHUNKS: float(index.chunks),
        **{f"index/{name}": float(count) for name, count in (index.update.counts() if index.update else {}).items()},
        SKIPPED_FILES: float(len(dataset.skipped_files)),
    }
    mlflow.log_metrics(metrics)
    if note := ci_note(int(metrics["eval/judged_questions"])):
        mlflow.set_tag(CI_NOTE_TAG, note)
    if dataset.skipped_files:
        mlflow.log_dict(dataset.skipped_files, SKIPPED_FILES_ARTIFACT)
    _write_outputs(job_dir, result, metrics, run_id, experiment, dataset, index)
    _write_diagnosis(job_dir, result, query.name, settings.pass_f1)
    print_results(str(run.pipeline.name), dataset, metrics, list(settings.ks), _stage_rows(query))
    print_skipped_files(dataset.skipped_files)
    return metrics


def _stage_rows(query: BuiltPipeline) -> list[tuple[str, bool]]:
    """The scored stages in pipeline order, each marked when its slot is `none` (it repeats the stage before it)."""
    return [
        (view.removeprefix(STAGE_PREFIX), isinstance(query.pipeline.get_component(socket.component), PassThrough))
        for view, socket in query.views.items()
        if view.startswith(STAGE_PREFIX)
    ]


def _tag_identity(dataset: Dataset, index: IndexInfo, query: BuiltPipeline) -> None:
    tags = {
        DATASET_TAG: dataset.name,
        DATASET_FINGERPRINT_TAG: dataset.fingerprint,
        CORPUS_FINGERPRINT_TAG: dataset.corpus_fingerprint,
        GOLDEN_FINGERPRINT_TAG: dataset.golden_fingerprint,
        LANGUAGE_TAG: dataset.language,
        INDEX_FINGERPRINT_TAG: index.fingerprint,
    }
    for name, instance in query.pipeline.walk():
        identity = getattr(instance, "tokenizer_identity", None)
        if callable(identity):
            tags |= {tokenizer_tag(name, k): str(v) for k, v in identity().items()}
    mlflow.set_tags(tags)
    mlflow.log_dict(dataset.source, DATASET_SOURCE_ARTIFACT)
    _log_dataset_input(dataset)
    _log_access(dataset)


def _log_access(dataset: Dataset) -> None:
    """Who may see each document of the index (`access.json`), which promotion compares and ships with the model."""
    meta_file = dataset.source.get("meta_file")
    access = IndexAccess.of(
        ((doc.meta.get("doc_id", doc.id), doc.meta) for doc in dataset.documents),
        file_digest(Path(meta_file)) if meta_file else None,
    )
    mlflow.log_dict(access.to_json(), ACCESS_FILE)
    mlflow.set_tags(access.tags())


def _log_dataset_input(dataset: Dataset) -> None:
    """MLflow's dataset tracking, so the UI's Dataset column shows the name and our fingerprint as its digest."""
    source = json.dumps(dataset.source, sort_keys=True, ensure_ascii=False, default=str)
    record = MlflowDataset(dataset.name, dataset.fingerprint[:36], "ragtune", source)
    context = InputTag(MLFLOW_DATASET_CONTEXT, "eval")
    MlflowClient().log_inputs(mlflow.active_run().info.run_id, datasets=[DatasetInput(record, tags=[context])])


def _write_outputs(
    job_dir: Path,
    result: Evaluation,
    metrics: dict[str, float],
    run_id: str,
    experiment: str,
    dataset: Dataset,
    index: IndexInfo,
) -> None:
    job_dir.mkdir(parents=True, exist_ok=True)
    job = JobFolder(job_dir)
    mlflow.log_artifact(str(job.write_per_question(record.to_json() for record in result.per_question)))
    table = _flat_table([record.to_json() for record in result.per_question])
    mlflow.log_table(table, PER_QUESTION_TABLE_ARTIFACT)
    job.write_metrics(metrics)
    run_info = {
        "run_id": run_id,
        "experiment": experiment,
        "tracking_uri": mlflow.get_tracking_uri(),
        "dataset_fingerprint": dataset.fingerprint,
        "index_fingerprint": index.fingerprint,
    }
    job.write_run_info(run_info)


def _answer_embeddings(embedder_settings: EmbedderSettings, query: BuiltPipeline) -> Any:
    """Answer metrics embed with the run's own text embedder (models.embedder.text); None without an answer.

    The pipeline's own query embedder serves when it is the same component (it is warmed up with the pipeline),
    so the model is not loaded twice.
    """
    if query.answer_output is None:
        return None
    embedder = instantiate_component(embedder_settings.text, "models.embedder.text", {})
    same = [c for _, c in query.pipeline.walk() if type(c) is type(embedder) and c.to_dict() == embedder.to_dict()]
    if same:
        return ragas_embeddings(same[0])
    embedder.warm_up()
    return ragas_embeddings(embedder)


def evidence_chunks(
    store: DocumentStore, golden: Sequence[GoldenItem], batch: int = EVIDENCE_BATCH
) -> dict[str, list[Document]]:
    """The chunks of the documents holding golden evidence, by source doc, so the diagnosis can ask whether any
    chunk covers it. Filtered lookups of `batch` documents at a time: a server-side store is never read whole, and
    no lookup reaches Weaviate's cap on one filtered query (weaviate-haystack pages by 9,999 objects, and a stock
    server refuses any page past its 10,000th result)."""
    doc_ids = sorted(set().union(*(evidence_doc_ids(item) for item in golden)))
    chunks: dict[str, list[Document]] = {}
    for start in range(0, len(doc_ids), batch):
        wanted = doc_ids[start : start + batch]
        for chunk in store.filter_documents({"field": "meta.doc_id", "operator": "in", "value": wanted}):
            chunks.setdefault(str(chunk.meta.get("doc_id")), []).append(chunk)
    return chunks


def _write_diagnosis(job_dir: Path, result: Evaluation, pipeline: str, pass_f1: float) -> None:
    table = job_dir / DIAGNOSIS_TABLE
    pd.DataFrame(result.diagnosis).to_csv(table, index=False)
    summary = job_dir / DIAGNOSIS_SUMMARY
    summary.write_text(diagnosis_markdown(result.diagnosis, pipeline, pass_f1), encoding="utf-8")
    mlflow.log_artifact(str(table))
    mlflow.log_artifact(str(summary))
    for path in write_confusion(result.per_question, job_dir, pipeline):
        mlflow.log_artifact(str(path))


def _flat_table(records: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """The per-question records as MLflow's UI shows a table: flat columns, nested lists as JSON text, and the
    candidates of every stage left to per_question.jsonl (fifty ids a cell, repeated per stage, are most of its
    size and nobody reads them there)."""
    columns = [
        key for key in dict.fromkeys(key for record in records for key in record)
        if not (key.startswith(STAGE_PREFIX) or key == "retrieval/chunks")
    ]
    return {
        column: [
            json.dumps(r.get(column), ensure_ascii=False) if isinstance(r.get(column), list) else r.get(column)
            for r in records
        ]
        for column in columns
    }
