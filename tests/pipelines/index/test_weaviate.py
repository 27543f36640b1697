"""store=weaviate: the collection schema, the filter translation and the cache check without a server; the whole
path (index, cache hit, retrieval, tenant filters) against a real server when WEAVIATE_URL is set."""

import json
import os
import uuid

import pytest
from haystack import Document
from haystack.document_stores.in_memory import InMemoryDocumentStore
from haystack_integrations.document_stores.weaviate._filters import convert_filters

from components.context.sentence_window_expander import SentenceWindowExpander
from components.retrievers.weaviate_search import weaviate_filters
from experiments.runs.config import validate
from experiments.runs.indexed import load_indexed_pipeline, prepare_pipeline
from pipelines.errors import UserError
from pipelines.index.weaviate import (
    BUILDING,
    EXACT_TEXT,
    EXACT_TEXT_ARRAYS,
    WeaviateUnavailableError,
    build_collection,
    collection_name,
    collection_settings,
    content_tokenization,
    lost_creation_race,
    weaviate_document_store,
)
from serving.principals import Principal, visible_filter
from tests.support.shipped import composed

WEAVIATE_URL = os.environ.get("WEAVIATE_URL")
needs_server = pytest.mark.skipif(
    not WEAVIATE_URL,
    reason="WEAVIATE_URL is not set: no Weaviate server can run here (embedded mode downloads a binary at run time); "
    "start one with `docker compose up -d weaviate` and set WEAVIATE_URL=http://localhost:8080",
)


def properties(settings):
    return {p["name"]: p for p in settings["properties"]}


def test_fields_filtered_by_exact_value_are_not_split_into_words():
    """With Weaviate's default `word` tokenisation a filter on tenant `acme` would match tenant `acme-labs`."""
    declared = properties(collection_settings("Ragtune_x", "gse_ch"))
    for field in (*EXACT_TEXT, *EXACT_TEXT_ARRAYS):
        assert declared[field]["tokenization"] == "field", field
    assert declared["acl"]["dataType"] == ["text[]"] and declared["content"]["tokenization"] == "gse_ch"


def test_sentence_numbers_are_declared_integers_for_the_sentence_windows_range_filter():
    assert properties(collection_settings("Ragtune_x", "word"))["sentence_id"]["dataType"] == ["int"]


def test_the_collection_declares_the_fields_the_sentence_window_lookup_filters_on():
    """SentenceWindowRetriever filters its source field by value and its split field by range: read off the
    expander that runs the lookup, so a renamed field cannot leave the schema behind."""
    lookup = SentenceWindowExpander(InMemoryDocumentStore()).retriever
    declared = properties(collection_settings("Ragtune_x", "gse_ch"))
    source, split = declared[lookup.source_id_meta_field], declared[lookup.split_id_meta_field]
    assert (source["dataType"], source["tokenization"], split["dataType"]) == (["text"], "field", ["int"])


def test_the_collection_compares_by_cosine_indexes_nulls_and_starts_unfinished():
    settings = collection_settings("Ragtune_x", "word")
    assert settings["vectorIndexConfig"] == {"distance": "cosine"} and settings["vectorizer"] == "none"
    assert settings["invertedIndexConfig"]["indexNullState"]  # public = tenant and acl are null
    assert settings["description"] == BUILDING


@pytest.mark.parametrize(("language", "expected"), [("en", "word"), ("zh", "gse_ch"), ("mixed", "trigram")])
def test_tokenization_follows_the_corpus_language(language, expected):
    """gse_ch (not gse, gse's Japanese dictionary) for Chinese; it cuts Latin words into letters, so a bilingual
    corpus gets trigram."""
    assert content_tokenization(language, None) == expected
    assert content_tokenization(language, "trigram") == "trigram"


def test_collection_names_follow_weaviates_rule():
    assert collection_name("Ragtune", "1516d616b87d4dbd46ce") == "Ragtune_1516d616b87d4dbd46ce"
    with pytest.raises(UserError, match="store.collection_prefix"):
        collection_name("ragtune-dev", "abc")


def conditions(weaviate_filter):
    if hasattr(weaviate_filter, "filters"):
        return [leaf for child in weaviate_filter.filters for leaf in conditions(child)]
    return [weaviate_filter]


@pytest.mark.parametrize("principal", [Principal("acme", ("hr", "managers")), Principal("initech")])
def test_the_tenant_scope_translates_to_declared_exact_match_properties(principal):
    """serve.py's scope must reach Weaviate on properties the schema declares with exact-value tokenisation."""
    leaves = conditions(convert_filters(weaviate_filters(visible_filter(principal))))
    declared = properties(collection_settings("Ragtune_x", "gse_ch"))
    assert {leaf.target for leaf in leaves} == {"tenant", "acl"}
    assert all(declared[leaf.target]["tokenization"] == "field" for leaf in leaves)
    assert all(leaf.value != [] for leaf in leaves)  # Weaviate refuses an empty ContainsAny


def test_no_url_fails_before_any_work_naming_the_key(monkeypatch):
    with pytest.raises(WeaviateUnavailableError, match="store.url.*WEAVIATE_URL"):
        weaviate_document_store(url=None, fingerprint="abc")


def test_an_unreachable_server_fails_with_the_url_not_a_client_traceback():
    with pytest.raises(WeaviateUnavailableError, match="cannot use http://127.0.0.1:9"):
        weaviate_document_store(url="http://127.0.0.1:9", fingerprint="abc", grpc_port=10)


def test_store_weaviate_picks_the_weaviate_retrievers_everywhere_a_bm25_or_dense_path_is():
    cfg = composed("pipeline=crag", "store=weaviate", "rewriter=decompose_sequential")
    components = cfg.pipeline.components
    assert components.bm25._target_.endswith("ScopedWeaviateBM25Retriever")
    assert components.dense._target_.endswith("ScopedWeaviateEmbeddingRetriever")
    assert cfg.crag.supplementary._target_.endswith("ScopedWeaviateBM25Retriever")
    assert "k1" not in components.bm25 and components.bm25.filter_policy == "merge"
    assert composed("pipeline=hybrid").pipeline.components.bm25._target_.endswith("BM25sRetriever")


def test_prepare_fails_clearly_without_a_server_before_any_indexing(monkeypatch, tmp_path):
    monkeypatch.delenv("WEAVIATE_URL", raising=False)
    cfg = composed("pipeline=hybrid", "store=weaviate", f"paths.cache={tmp_path}")
    validate(cfg)
    with pytest.raises(WeaviateUnavailableError, match="WEAVIATE_URL"):
        prepare_pipeline(validate(cfg))
    update = composed("pipeline=hybrid", "store=weaviate", "ingest.update=true", f"paths.cache={tmp_path}")
    with pytest.raises(UserError, match="ingest.update"):
        prepare_pipeline(validate(update))


class RecordingStore:
    """Control flow only: what build_collection asks of a store. Backed by the WEAVIATE_URL tests below."""

    def __init__(self, description, objects=0):
        self.description, self.objects, self.deleted = description, objects, 0
        self.collection = self
        self.name = "Ragtune_fp"
        self.config = self

    def get(self):
        return self

    def update(self, description):
        self.description = description

    def count_documents(self):
        return self.objects

    def delete_all_documents(self):
        self.deleted += 1
        self.objects = 0

    def write_documents(self, documents, policy=None):
        self.objects += len(documents)
        return len(documents)


def spec():
    return {
        "components": {"writer": {"_target_": "haystack.components.writers.DocumentWriter",
                                  "document_store": "@store", "policy": "OVERWRITE"}},
        "connections": [],
        "inputs": {"documents": ["writer.documents"]},
    }


def test_a_finished_collection_with_this_fingerprint_is_a_cache_hit(tmp_path):
    store = RecordingStore(json.dumps({"fingerprint": "fp", "chunks": 3}), objects=3)
    info = build_collection([Document(content="x")], spec(), store, tmp_path, "fp")
    assert info.cache_hit and info.chunks == 3 and store.deleted == 0


def test_a_half_built_collection_is_emptied_rebuilt_and_marked_finished(tmp_path):
    store = RecordingStore(BUILDING, objects=5)
    documents = [Document(content="a"), Document(content="b")]
    info = build_collection(documents, spec(), store, tmp_path, "fp", lineage="ln")
    assert not info.cache_hit and store.deleted == 1 and info.chunks == 2
    assert "no finished build" in info.rebuilt_reason
    manifest = json.loads(store.description)
    assert manifest["fingerprint"] == "fp" and manifest["chunks"] == 2 and manifest["lineage"] == "ln"


def test_a_count_that_disagrees_with_the_manifest_is_rebuilt(tmp_path):
    store = RecordingStore(json.dumps({"fingerprint": "fp", "chunks": 3}), objects=2)
    info = build_collection([Document(content="a")], spec(), store, tmp_path, "fp")
    assert not info.cache_hit and "holds 2 objects but its build recorded 3" in info.rebuilt_reason


class KilledStore(RecordingStore):
    def write_documents(self, documents, policy=None):
        self.objects += 1
        raise KeyboardInterrupt  # the job is killed halfway through the rebuild


def test_a_killed_rebuild_leaves_the_collection_unfinished_not_under_its_old_manifest(tmp_path):
    """Else a later run whose count happened to equal the old manifest's would take half a build for a hit."""
    store = KilledStore(json.dumps({"fingerprint": "fp", "chunks": 1}), objects=3)
    with pytest.raises(KeyboardInterrupt):
        build_collection([Document(content="a")], spec(), store, tmp_path, "fp")
    assert store.description == BUILDING and store.objects == 1


class RacingClient:
    """Control flow only: the client state after another job created the collection first."""

    def __init__(self, exists):
        self.exists_now = exists
        self.collections = self

    def is_connected(self):
        return True

    def exists(self, name):
        return self.exists_now


def test_losing_the_collection_creation_race_to_another_job_is_not_an_error():
    racing = type("Store", (), {"_client": RacingClient(exists=True)})()
    assert lost_creation_race(racing, "Ragtune_fp")
    assert not lost_creation_race(type("Store", (), {"_client": RacingClient(exists=False)})(), "Ragtune_fp")
    assert not lost_creation_race(type("Store", (), {"_client": None})(), "Ragtune_fp")


@pytest.fixture
def weaviate_overrides(tmp_path):
    """A collection of its own per test (removed after it), over the tenant-split demo."""
    prefix = f"RagtuneTest{uuid.uuid4().hex[:8]}"
    overrides = ["store=weaviate", f"store.collection_prefix={prefix}", f"paths.cache={tmp_path}",
                 "dataset.meta_file=data/demo/tenants.jsonl"]
    yield overrides
    store = prepare_pipeline(validate(composed("pipeline=hybrid", *overrides))).store
    store.client.collections.delete(store.collection.name)


@pytest.fixture
def weaviate_cfg(weaviate_overrides):
    cfg = composed("pipeline=hybrid", *weaviate_overrides)
    validate(cfg)
    return cfg


def golden_hit_rate(indexed) -> float:
    """Share of questions with a relevant document among the retrieved ones."""
    items = [item for item in indexed.dataset.golden if item.relevant_doc_ids]
    query = indexed.query
    found = [{d.meta["doc_id"] for d in query.view_documents(query.run(question=i.question))["retrieval"]} for i in items]
    return sum(bool(f & set(i.relevant_doc_ids)) for f, i in zip(found, items, strict=True)) / len(items)


@needs_server
@pytest.mark.slow
@pytest.mark.parametrize("fusion_type", ["relative_score", "ranked"])
def test_weaviates_own_hybrid_search_runs_on_the_same_collection(weaviate_cfg, weaviate_overrides, fusion_type):
    ours = load_indexed_pipeline(validate(weaviate_cfg))
    theirs = load_indexed_pipeline(validate(composed("pipeline=weaviate_hybrid", *weaviate_overrides,
                                            f"pipeline.components.hybrid.fusion_type={fusion_type}")))
    assert theirs.fingerprint == ours.fingerprint and theirs.index().cache_hit  # one collection, not re-embedded
    assert golden_hit_rate(theirs) >= 0.8


@needs_server
@pytest.mark.slow
def test_hybrid_on_weaviate_indexes_once_and_keeps_tenants_apart(weaviate_cfg):
    first = load_indexed_pipeline(validate(weaviate_cfg))
    assert first.index().cache_hit  # the build above marked it finished
    chunks = first.store.count_documents()
    again = prepare_pipeline(validate(weaviate_cfg))
    info = again.index()
    assert info.cache_hit and info.chunks == chunks and again.store.collection.name == first.store.collection.name
    served = prepare_pipeline(validate(weaviate_cfg), snapshot=first.index_dir)  # as a promoted bundle opens it
    assert served.source is None and served.index().chunks == chunks
    principal = Principal("acme")
    scope = visible_filter(principal)
    for item in first.dataset.golden[:20]:
        outputs = first.query.run(question=item.question, filters=scope)
        for doc in first.query.view_documents(outputs)["retrieval"]:
            assert doc.meta.get("tenant") in (None, "acme") and not doc.meta.get("acl"), doc.id
    assert golden_hit_rate(first) >= 0.9


@needs_server
@pytest.mark.slow
def test_sentence_windows_are_fetched_from_the_collection(weaviate_overrides):
    cfg = composed(
        "ingest=sentence_window",
        "pipeline=bm25",
        "answer=extractive",
        "+pipeline.answer=${answer.stage}",
        *weaviate_overrides,
    )
    indexed = load_indexed_pipeline(validate(cfg))
    try:
        query = indexed.query
        outputs = query.run(question="How many days of annual leave do full-time employees get?")
        hits = query.documents_at(outputs, query.views["stage/context_window"])
        context = query.view_documents(outputs)["context"]
        assert hits and sum(len(d.content) for d in context) > sum(len(d.content) for d in hits)
    finally:
        indexed.store.client.collections.delete(indexed.store.collection.name)


def test_docker_compose_pins_the_servers_ragtune_is_pinned_against():
    from importlib.metadata import version

    import yaml

    from experiments.runs.config import PROJECT_DIR

    services = yaml.safe_load((PROJECT_DIR / "docker-compose.yml").read_text())["services"]
    assert services["mlflow"]["image"].endswith(f":v{version('mlflow')}")
    weaviate = services["weaviate"]
    assert weaviate["image"].rsplit(":", 1)[1].count(".") == 2  # an exact release, never `latest`
    assert weaviate["environment"]["ENABLE_TOKENIZER_GSE_CH"] == "true"  # the tokenizer zh corpora get
    assert all(port.startswith("127.0.0.1:") for service in services.values() for port in service["ports"])


def test_a_build_leaves_a_record_promotion_ships_and_serving_checks(tmp_path):
    """The bundle's index folder names the collection build; a rebuilt or emptied collection is not served."""
    from experiments.runs.indexed import snapshot_fingerprint
    from pipelines.index.weaviate import open_collection

    store = RecordingStore(BUILDING)
    build_collection([Document(content="a"), Document(content="b")], spec(), store, tmp_path, "fp")
    record = tmp_path / "fp"
    assert snapshot_fingerprint(record) == "fp" and json.loads((record / "manifest.json").read_text())["chunks"] == 2
    assert open_collection(store, record).chunks == 2
    store.description = json.dumps(json.loads(store.description) | {"created": 1.0})  # rebuilt since
    with pytest.raises(UserError, match="not the build this model was evaluated on"):
        open_collection(store, record)
    store.description, store.objects = json.loads((record / "manifest.json").read_text()), 1
    store.description = json.dumps(store.description)
    with pytest.raises(UserError, match="holds 1 objects"):
        open_collection(store, record)
