"""The two IndexBackends: the store's part of the fingerprint as before the Protocol, and a shipped snapshot opened
read-only. Building is tested per backend (test_build.py, test_weaviate.py)."""

from haystack.document_stores.in_memory import InMemoryDocumentStore

from pipelines.index import IndexBackend, LocalSnapshots, WeaviateCollections
from pipelines.index.snapshot import LAST_USED, save_snapshot
from tests.support.snapshots import CHUNKS


def test_the_stores_part_of_the_fingerprint_is_what_it_was():
    """Changing these strings would change every index fingerprint, and so invalidate every user's cache."""
    assert LocalSnapshots("in_memory").identity("zh") == "in_memory"
    auto = WeaviateCollections(None)
    assert [auto.identity(lang) for lang in ("en", "zh", "mixed")] == ["weaviate:word", "weaviate:gse_ch", "weaviate:trigram"]
    assert WeaviateCollections("field").identity("en") == "weaviate:field"


def test_a_shipped_snapshot_opens_read_only(tmp_path):
    save_snapshot(CHUNKS, tmp_path / "fp", {"fingerprint": "fp"})
    backend: IndexBackend = LocalSnapshots("in_memory")
    store = InMemoryDocumentStore()
    info = backend.open(store, tmp_path / "fp")
    assert (info.fingerprint, info.path, info.cache_hit, info.chunks) == ("fp", tmp_path / "fp", True, 3)
    assert store.count_documents() == 3 and not (tmp_path / "fp" / LAST_USED).exists()
    assert not backend.server_side and WeaviateCollections(None).server_side
