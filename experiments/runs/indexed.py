"""A config becomes a filled store and a warm query pipeline here, and only here.

The runner, the benchmarks and the reload check share it, so what they evaluate is built one way. Preparing does
everything that can fail cheaply (models resolved, the graph built and checked) before any indexing.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from haystack import Pipeline
from haystack.document_stores.in_memory import InMemoryDocumentStore
from haystack.document_stores.types import DocumentStore

from components.joiners.rank_fusion_joiner import RankFusionJoiner
from components.retrievers.retrieval import stored_rows
from experiments.datasets import Dataset, load_dataset
from experiments.runs.identities import model_identities
from experiments.runs.model_settings import EmbedderSettings
from experiments.runs.run_settings import RunSettings
from experiments.runs.settings import (
    FusionFitMode,
    IngestSettings,
    InMemoryStore,
    StoreSettings,
    WeaviateStore,
)
from pipelines.builder import build_pipeline, reads_embeddings, uses_components
from pipelines.built import BuiltPipeline
from pipelines.errors import ConfigError
from pipelines.fusion_fit import FusionFit, FusionFitError, fit_fusion
from pipelines.index import (
    DamagedIndexError,
    IndexBackend,
    IndexInfo,
    LocalSnapshots,
    WeaviateCollections,
    index_fingerprint,
    ingest_spec,
)
from pipelines.index.snapshot import read_manifest
from pipelines.index.weaviate import check_collection_options
from pipelines.instantiate import instantiate_component
from pipelines.models import check_endpoint, embedder_identity, resolve_model
from pipelines.spec import GOLDEN_INPUTS

HAYSTACK_RETRIEVERS = "haystack.components.retrievers.in_memory."
HAYSTACK_STORE = "haystack.document_stores.in_memory.InMemoryDocumentStore"
# Haystack 3.4 deserialises only allowlisted modules (haystack, haystack_integrations, ...); ours are trusted too:
# our components and the store `store=in_memory` gives them.
PROJECT_MODULES = ("components", "pipelines.index.compact_store")


def _wrapped_parts(instance: Any) -> tuple[Any, ...]:
    """The parts a component wraps and runs itself: CalibratedRanker's ranker, MultiQueryRetriever's retriever."""
    return tuple(getattr(instance, name, None) for name in ("ranker", "retriever"))


@dataclass
class IndexedPipeline:
    """`dataset` is None for a promoted run, which ships its index snapshot but not its corpus."""

    source: Dataset | None
    store: DocumentStore
    parents: DocumentStore  # the parent blocks of an index that has them (ingest.parents), never searched
    spec: dict[str, Any] | None
    fingerprint: str
    cache_dir: Path
    query: BuiltPipeline
    models: dict[str, str]  # slot -> model identity (experiments/runs/identities.py), recorded with the run
    backend: IndexBackend  # where the index lives: a snapshot here, or a collection on a server (store=weaviate)
    lineage: str | None = None  # what every index built this way shares, whatever the corpus (ingest.update)
    update: bool = False
    fusion_fit: str | None = None  # retriever.fusion.fit_queries when retriever.fusion.fit=auto
    fit: FusionFit | None = None  # set by warm_up

    @property
    def dataset(self) -> Dataset:
        if self.source is None:
            raise ConfigError(f"index {self.fingerprint} was loaded from a snapshot: its dataset is not at hand")
        return self.source

    @property
    def index_dir(self) -> Path:
        return self.cache_dir / self.fingerprint

    @property
    def server_side(self) -> bool:
        """The index is a collection on a server (store=weaviate), not a snapshot here."""
        return self.backend.server_side

    def index(self) -> IndexInfo:
        """Fills the store from the index cache, or builds the index (and caches it); a shipped index is only
        read."""
        if self.spec is None:
            return self.backend.open(self.store, self.index_dir, self.parents)
        return self.backend.build(
            self.dataset.documents, self.spec, self.store, self.cache_dir, self.fingerprint, self.lineage, self.update,
            self.parents,
        )

    def warm_up(self) -> dict[str, float]:
        """Warms every component (seconds per component), then, with `retriever.fusion.fit=auto`, fits the fusion's
        dense weight to this index (pipelines/fusion_fit.py; timed as `fusion_fit`)."""
        seconds = self.query.warm_up()
        if self.fusion_fit is None:
            return seconds
        if self.server_side:
            raise ConfigError("config key 'retriever.fusion.fit': auto reads the index's chunks; store=weaviate keeps "
                              "them on the server: set retriever.fusion.weights instead")
        fusions = [name for name, instance in self.query.pipeline.walk() if isinstance(instance, RankFusionJoiner)]
        if len(fusions) != 1:
            raise ConfigError(f"config key 'retriever.fusion.fit': auto fits one fusion, pipeline {self.query.name} "
                              f"has {len(fusions)}")
        start = time.perf_counter()
        try:
            self.fit = fit_fusion(self.query.pipeline, fusions[0], stored_rows(self.store).documents, self.index_dir,
                                  self.fusion_fit, write=self.spec is not None)
        except FusionFitError as e:
            raise ConfigError(str(e)) from None
        return seconds | {"fusion_fit": time.perf_counter() - start}

    def reads_index(self) -> set[str]:
        """Components that read the store, themselves or through a ranker or retriever they wrap (their warm-up
        time counts as indexing: BM25 loads its index, the e5 reranker takes the index's vectors then)."""
        return {
            name
            for name, instance in self.query.pipeline.walk()
            if any(hasattr(part, "document_store") for part in (instance, *_wrapped_parts(instance)))
        }


def prepare_pipeline(
    settings: RunSettings, input_names: Sequence[str] | None = GOLDEN_INPUTS, snapshot: Path | None = None
) -> IndexedPipeline:
    """The dataset, an empty store and the built query pipeline; an unavailable model fails here, before any work.

    With `snapshot` (a promoted run's index folder, named by its fingerprint) no dataset is read: the index is
    the snapshot, whatever the corpus has become since."""
    embedder_settings = settings.models.embedder
    embedder = embedder_identity(dataclasses.asdict(embedder_settings))
    check_embedders_match(embedder_settings)
    if embedder_settings.endpoint is not None and reads_embeddings(settings.pipeline):  # before any work
        check_endpoint(dataclasses.asdict(embedder_settings.endpoint), key="models.embedder.endpoint",
                       what="embedding endpoint")
    update = settings.ingest.update
    backend = index_backend(settings.store, settings.ingest)
    dataset, spec, lineage = None, None, None
    if snapshot is None:
        dataset = load_dataset(settings.dataset, settings.cache)
        embeds = reads_embeddings(settings.pipeline)  # a BM25-only pipeline indexes no vectors
        spec = ingest_spec(settings.ingest, embedder_settings.document if embeds else None)
        store_id = backend.identity(dataset.language)
        fingerprint = index_fingerprint(dataset.corpus_fingerprint, spec, embedder, store_id)
        lineage = index_fingerprint(None, spec, embedder, store_id)
        cache_dir = Path(settings.ingest.cache_dir)
    else:
        fingerprint, cache_dir = snapshot_fingerprint(snapshot), snapshot.parent
    store: DocumentStore = instantiate_component(
        store_spec(settings),
        "store",
        # A promoted run's collection exists already: the language would only shape a new one's schema.
        {"fingerprint": fingerprint, "language": dataset.language if dataset else "mixed"},
    )
    parents = InMemoryDocumentStore()
    resources = {"store": store, "parents": parents, "index_dir": str(cache_dir / fingerprint)}
    query = build_pipeline(settings.pipeline, resources, input_names=input_names)
    models = model_identities(settings, query, embedder)
    fusion = settings.retriever.fusion
    fit = str(fusion.fit_queries) if fusion.fit == FusionFitMode.auto else None
    return IndexedPipeline(
        dataset, store, parents, spec, fingerprint, cache_dir, query, models, backend, lineage, update, fit
    )


def store_spec(settings: RunSettings) -> dict[str, Any]:
    """The store's factory and settings; Haystack's own in-memory retrievers (`pipeline=bm25_haystack`, the
    baseline) search only Haystack's InMemoryDocumentStore, which then holds the index instead of ours."""
    spec = {k: v for k, v in dataclasses.asdict(settings.store).items() if k != "kind"}
    if isinstance(settings.store, InMemoryStore) and uses_components(settings.pipeline, HAYSTACK_RETRIEVERS):
        spec["_target_"] = HAYSTACK_STORE
    return spec


def index_backend(store: StoreSettings, ingest: IngestSettings) -> IndexBackend:
    """Where `store.kind` keeps the index; what it cannot do (`ingest.update` or parent blocks on a server) fails
    here, before any work."""
    if isinstance(store, WeaviateStore):
        check_collection_options(ingest, ingest.update)
        return WeaviateCollections(store.tokenization)
    return LocalSnapshots(str(store.kind))


def snapshot_fingerprint(snapshot: Path) -> str:
    """The fingerprint a snapshot's manifest records, which must also be its folder's name."""
    try:
        recorded = read_manifest(snapshot).get("fingerprint")
    except DamagedIndexError as e:
        raise ConfigError(f"index snapshot {snapshot}: {e}") from None
    if recorded != snapshot.name:
        raise ConfigError(f"index snapshot {snapshot}: its manifest records fingerprint {recorded}, not its folder's name")
    return recorded


def load_indexed_pipeline(
    settings: RunSettings, input_names: Sequence[str] | None = GOLDEN_INPUTS, snapshot: Path | None = None
) -> IndexedPipeline:
    """Prepared, indexed (or filled from `snapshot`) and warmed up: ready to answer."""
    indexed = prepare_pipeline(settings, input_names, snapshot)
    indexed.index()
    indexed.warm_up()
    return indexed


def load_logged_pipeline(text: str, extra_modules: Sequence[str] = ()) -> Pipeline:
    """A run's logged `pipeline.yaml` as a Haystack Pipeline; `extra_modules` trusts more components' modules.

    An in-memory store is serialised without its documents: in another process the reloaded store is empty until
    it is filled again from the run's index snapshot (`load_indexed_pipeline` on the run's config does both)."""
    return Pipeline.loads(text, allowed_modules=[*PROJECT_MODULES, *extra_modules])


def check_embedders_match(embedder: EmbedderSettings) -> None:
    """Index and query vectors must come from the model the run records (models.embedder.model, and for an
    endpoint models.embedder.query_model)."""
    if embedder.endpoint is not None:
        expected = {"document": embedder.model, "text": embedder.query_model or embedder.model}
        named = {"document": "models.embedder.model", "text": "models.embedder.query_model"}
    else:
        path = resolve_model(embedder.model)
        expected = {"document": path, "text": path}
        named = {side: "models.embedder.model (${model_path:${models.embedder.model}})" for side in expected}
    for side, model in expected.items():
        if str(getattr(embedder, side)["model"]) != model:
            raise ConfigError(
                f"config key 'models.embedder.{side}.model': must be the model named by {named[side]}; "
                f"set that instead"
            )
