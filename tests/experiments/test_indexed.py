"""The one loader (config -> filled store + warm pipeline), and the pipeline a run logs: reloaded, it answers alike."""

from dataclasses import replace

import pytest

from experiments.evaluation.evaluate import pipeline_inputs
from experiments.runs.config import validate
from experiments.runs.indexed import (
    index_backend,
    load_indexed_pipeline,
    load_logged_pipeline,
    prepare_pipeline,
    snapshot_fingerprint,
)
from pipelines.errors import ConfigError, UserError
from pipelines.index import LocalSnapshots, WeaviateCollections
from pipelines.index.snapshot import save_snapshot
from tests.support.shipped import composed


def config(*overrides):
    cfg = composed(*overrides)
    validate(cfg)
    return cfg


def test_prepare_builds_the_graph_and_plans_the_index_without_indexing(tmp_path):
    prepared = prepare_pipeline(validate(config("pipeline=bm25", f"paths.cache={tmp_path}")))
    assert prepared.query.name == "bm25" and prepared.store.count_documents() == 0
    assert prepared.index_dir == tmp_path / "index" / prepared.fingerprint and not prepared.index_dir.exists()
    assert "embedder" not in prepared.spec["components"]  # BM25 reads no vectors, so none are made
    assert prepared.reads_index() == {"bm25"}
    assert prepared.update is False  # ingest.update is opt-in
    assert prepare_pipeline(validate(config("pipeline=bm25", f"paths.cache={tmp_path}", "ingest.update=true"))).update is True


def test_the_shipped_store_is_compact_but_haystacks_own_retrievers_get_haystacks_store(tmp_path):
    shipped = prepare_pipeline(validate(config("pipeline=bm25", f"paths.cache={tmp_path}")))
    baseline = prepare_pipeline(validate(config("pipeline=bm25_haystack", f"paths.cache={tmp_path}")))
    assert type(shipped.store).__name__ == "CompactDocumentStore"
    assert type(baseline.store).__name__ == "InMemoryDocumentStore"  # InMemoryBM25Retriever searches no other
    assert shipped.fingerprint == baseline.fingerprint  # the same index, held by another store
    reloaded = load_logged_pipeline(shipped.query.pipeline.dumps())  # the logged pipeline.yaml names the store
    assert type(reloaded.get_component("bm25").document_store).__name__ == "CompactDocumentStore"


@pytest.mark.slow
def test_the_logged_pipeline_yaml_reloads_and_answers_the_same(tmp_path):
    """What run.py logs as pipeline.yaml is the pipeline: Pipeline.loads gives the same documents and answers."""
    cfg = config("pipeline=advanced", "reranker=e5", "dataset=demo_conversations", f"paths.cache={tmp_path}")
    indexed = load_indexed_pipeline(validate(cfg))
    assert indexed.store.count_documents() > 0
    reloaded = replace(indexed.query, pipeline=load_logged_pipeline(indexed.query.pipeline.dumps()))
    reloaded.warm_up()
    items = [item for item in indexed.dataset.golden if item.history][:3] + indexed.dataset.golden[-2:]
    for item in items:
        inputs = pipeline_inputs(indexed.query, item)
        original, again = indexed.query.run(**inputs), reloaded.run(**inputs)
        for view in ("retrieval", "context", "stage/reranker"):
            docs = indexed.query.view_documents(original)[view]
            assert [(d.id, d.score) for d in reloaded.view_documents(again)[view]] == [(d.id, d.score) for d in docs]
        first, second = indexed.query.answer(original), reloaded.answer(again)
        assert (second.data, second.meta) == (first.data, first.meta), item.id


def test_a_snapshot_fills_the_store_without_reading_the_corpus(tmp_path):
    """A promoted run ships its snapshot, not its corpus: the store comes from the snapshot, the dataset is absent."""
    cfg = config("pipeline=bm25", f"paths.cache={tmp_path}")
    built = prepare_pipeline(validate(cfg))
    built.index()
    served = prepare_pipeline(validate(cfg), snapshot=built.index_dir)
    assert served.fingerprint == built.fingerprint and served.index().chunks == built.store.count_documents()
    assert served.store.count_documents() == built.store.count_documents()
    with pytest.raises(ConfigError, match="loaded from a snapshot: its dataset is not at hand"):
        served.dataset  # noqa: B018


def test_a_snapshot_whose_folder_and_manifest_disagree_is_refused(tmp_path):
    save_snapshot([], tmp_path / "renamed", {"fingerprint": "abc"})
    with pytest.raises(ConfigError, match="its manifest records fingerprint abc, not its folder's name"):
        snapshot_fingerprint(tmp_path / "renamed")
    with pytest.raises(ConfigError, match="manifest.json is missing"):
        snapshot_fingerprint(tmp_path / "nothing")


def test_the_store_kind_picks_the_index_backend_once():
    updating = validate(composed("ingest.update=true")).ingest
    assert index_backend(validate(composed()).store, updating) == LocalSnapshots("in_memory")
    weaviate = validate(composed("store=weaviate", "store.tokenization=trigram"))
    assert index_backend(weaviate.store, weaviate.ingest) == WeaviateCollections("trigram")
    with pytest.raises(UserError, match="ingest.update"):  # refused before any work
        index_backend(weaviate.store, updating)


@pytest.mark.parametrize("option", ["parent_child", "hierarchical"])
def test_an_index_with_parent_blocks_is_refused_on_weaviate_naming_ingest(option):
    settings = validate(composed("store=weaviate", f"ingest={option}"))
    with pytest.raises(UserError, match=f"^config key 'ingest': ingest={option} keeps its parent blocks"):
        index_backend(settings.store, settings.ingest)
