"""A promoted run as a folder (a *bundle*): what `experiments.promote` ships inside an MLflow model, and what
`serve.py` and `mlflow models serve` load.

    config.yaml            the run's portable config (experiments/portable.py), read to rebuild the pipeline
    config.resolved.yaml   the run's resolved config, for the record
    pipeline.yaml          the Haystack pipeline the run logged, for the record
    identities.json        the index fingerprint and every model's identity, as the run recorded them
    index/<fingerprint>/   the index snapshot: chunks, embeddings, manifest, and the BM25 index beside them; for
                           store=weaviate only the manifest of the collection build the run evaluated
    files/                 the project files the config reads (`${project_path:...}`), e.g. the k-NN examples

Loading refuses a bundle whose models are not the ones evaluated (another package version, a retrained grader),
so what is served is what was measured.
"""

from __future__ import annotations

import json
import shutil
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from haystack import Document
from haystack.dataclasses import StreamingChunk
from mlflow.entities import Run
from mlflow.tracking import MlflowClient
from omegaconf import OmegaConf

from experiments.config import PROJECT_DIR, ConfigError, register_resolvers, validate
from experiments.errors import UserError
from experiments.evaluate import answer_fields, request_inputs
from experiments.grading_metrics import grading_record
from experiments.identities import TAG_PREFIX
from experiments.indexed import IndexedPipeline, prepare_pipeline
from experiments.portable import PORTABLE_CONFIG, project_files, relocated
from experiments.tracing import timing_components
from pipelines.ingest import LAST_USED, MANIFEST

CONFIG, RESOLVED, PIPELINE, IDENTITIES, INDEX, FILES = (
    "config.yaml", "config.resolved.yaml", "pipeline.yaml", "identities.json", "index", "files",
)
SNIPPET_CHARS = 240
# Identities the run records but serving does not run: the LLM judge scores, it does not answer.
NOT_SERVED = {"judge"}


class PromotionError(UserError):
    """A run that cannot be promoted, or a bundle that cannot be served as evaluated; the message says why."""


def write_bundle(client: MlflowClient, run: Run, out: Path) -> dict[str, Any]:
    """Fills `out` with the run's bundle; returns identities.json's content."""
    run_id = run.info.run_id
    logged = {artifact.path for artifact in client.list_artifacts(run_id)}
    portable = _artifact_text(client, run_id, logged, PORTABLE_CONFIG)
    resolved = _artifact_text(client, run_id, logged, "config.yaml")
    fingerprint = run.data.tags.get("ragtune.index_fingerprint")
    if not fingerprint:
        raise PromotionError(f"run {run_id} recorded no index (tag ragtune.index_fingerprint): it did not finish indexing")
    out.mkdir(parents=True, exist_ok=True)
    (out / CONFIG).write_text(portable, encoding="utf-8")
    (out / RESOLVED).write_text(resolved, encoding="utf-8")
    (out / PIPELINE).write_text(_artifact_text(client, run_id, logged, PIPELINE), encoding="utf-8")
    cache_dir = Path(OmegaConf.create(resolved).ingest.cache_dir)
    _copy_snapshot(cache_dir / fingerprint, out / INDEX / fingerprint, run_id)
    for relative in project_files(portable):
        source = PROJECT_DIR / relative
        if not source.is_file():
            raise PromotionError(f"run {run_id} reads {relative} (config ${{project_path:{relative}}}), which is gone")
        (out / FILES / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, out / FILES / relative)
    models = {key.removeprefix(TAG_PREFIX): value for key, value in run.data.tags.items() if key.startswith(TAG_PREFIX)}
    identities = {"index_fingerprint": fingerprint, "models": {k: v for k, v in models.items() if k not in NOT_SERVED}}
    (out / IDENTITIES).write_text(json.dumps(identities, indent=2, sort_keys=True), encoding="utf-8")
    return identities


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


@dataclass
class ServedPipeline:
    """A bundle's pipeline, filled from its snapshot and warm. One question runs at a time: llama.cpp models must
    never be called from two threads at once, and the pipeline's components are not thread-safe."""

    indexed: IndexedPipeline
    lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def load(cls, bundle: Path) -> ServedPipeline:
        register_resolvers()
        try:
            identities = json.loads((bundle / IDENTITIES).read_text(encoding="utf-8"))
            cfg = relocated((bundle / CONFIG).read_text(encoding="utf-8"), bundle / FILES)
        except FileNotFoundError as e:
            raise PromotionError(f"{bundle} is not a ragtune bundle: {Path(e.filename).name} is missing") from None
        validate(cfg)
        indexed = prepare_pipeline(cfg, snapshot=bundle / INDEX / identities["index_fingerprint"])
        check_identities(identities["models"], indexed.models)
        return cls.warm(indexed)

    @classmethod
    def warm(cls, indexed: IndexedPipeline) -> ServedPipeline:
        """Fills the store and warms every component: ready for the first question."""
        indexed.index()
        indexed.query.warm_up()
        return cls(indexed)

    @property
    def takes_filters(self) -> bool:
        return "filters" in self.indexed.query.inputs

    def ask(
        self,
        question: str,
        history: Sequence[Mapping[str, str]] | None = None,
        filters: Mapping[str, Any] | None = None,
        stages: bool = False,
        on_token: Callable[[str], None] | None = None,
    ) -> dict[str, Any]:
        """The reply a run's per_question.jsonl records for this question (answer, refusal, citations), plus the
        route and CRAG label where the pipeline has them, a snippet of each cited chunk, and milliseconds per
        component (`stages_ms`); with `stages`, the chunk and doc ids at every stage, to see which layer returned what.
        `on_token` gets the answer generator's text as it is produced (raw: before the citation check)."""
        query = self.indexed.query
        if filters and not self.takes_filters:  # dropping them would serve documents the caller may not see
            raise PromotionError(f"pipeline {query.name} has no 'filters' input: it cannot serve filtered requests")
        with self.lock, timing_components(forward=True) as timer:
            outputs = query.run(streaming_callback=_text_of(on_token), **request_inputs(query, question, history, filters))
            spent = timer.take()
        answer = query.answer(outputs)
        reply: dict[str, Any] = {"answer": None, "refused": False, "citations": []}
        if answer is not None:
            reply = answer_fields(answer)
            snippets = {doc.id: (doc.content or "")[:SNIPPET_CHARS] for doc in answer.documents}
            reply["citations"] = [c | {"snippet": snippets.get(c.get("chunk_id"), "")} for c in reply["citations"]]
        reply["documents"] = [
            _reference(d) | {"score": d.score}
            for d in query.documents_at(outputs, query.context_output or query.retrieval_output)
        ]
        if query.route_component is not None:
            reply["route"] = query.route(outputs)
        if query.grader is not None:
            reply["crag_label"] = grading_record(outputs.get(query.grader, {}))["crag_label"]
        if stages:
            reply["stages"] = {view: [_reference(d) for d in docs] for view, docs in query.view_documents(outputs).items()}
        reply["stages_ms"] = {name: round(ms, 1) for name, ms in spent.ms.items()}
        return reply


def _text_of(on_token: Callable[[str], None] | None) -> Callable[[StreamingChunk], None] | None:
    """A Haystack streaming callback that hands on each chunk's text (tool-call and empty chunks carry none)."""
    if on_token is None:
        return None
    return lambda chunk: on_token(chunk.content) if chunk.content else None


def _reference(document: Document) -> dict[str, Any]:
    return {"chunk_id": document.id, "doc_id": document.meta.get("doc_id")}


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
