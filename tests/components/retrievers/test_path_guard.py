"""PathGuard's control flow, with fakes: a path that raises or outlasts its timeout is dropped and named; the real
remote embedder stopped mid-load is tests/serving/test_degradation.py."""

import threading

import pytest
from haystack import Document, Pipeline, component
from haystack.document_stores.in_memory import InMemoryDocumentStore
from haystack.errors import FilterError

from components.retrievers.bm25_retriever import BM25sRetriever
from components.retrievers.path_guard import PathGuard
from pipelines.haystack_compat import input_sockets

DOCS = [Document(id="a", content="annual leave", score=1.0)]


@component
class Path:
    """An embedding retriever that returns DOCS, raises `error`, or waits for `release` first."""

    def __init__(self, error: Exception | None = None, release: threading.Event | None = None) -> None:
        self.error, self.release, self.calls = error, release, []

    @component.output_types(documents=list[Document])
    def run(self, query_embedding: list[float], filters: dict | None = None) -> dict[str, list[Document]]:
        self.calls.append(query_embedding)
        if self.release is not None:
            assert self.release.wait(timeout=30), "the test never released the path"
        if self.error is not None:
            raise self.error
        return {"documents": DOCS}


@component
class Embedder:
    def __init__(self, error: Exception | None = None) -> None:
        self.error = error

    @component.output_types(embedding=list[float])
    def run(self, text: str) -> dict[str, list[float]]:
        if self.error is not None:
            raise self.error
        return {"embedding": [float(len(text))]}


def test_a_path_that_answers_hands_on_its_documents_and_no_degradation():
    path = Path()
    result = PathGuard("dense", path, query_embedder=Embedder()).run(query="leave", filters={"x": 1})
    assert result == {"documents": DOCS, "degraded": []}
    assert path.calls == [[5.0]]


@pytest.mark.parametrize("retriever, embedder", [(Path(RuntimeError("store down")), Embedder()),
                                                  (Path(), Embedder(ConnectionError("endpoint down")))])
def test_a_path_that_raises_is_dropped_and_named(retriever, embedder, caplog):
    result = PathGuard("dense", retriever, query_embedder=embedder).run(query="leave")
    assert result == {"documents": [], "degraded": ["dense"]}
    assert "'dense' dropped" in caplog.text


def test_a_path_past_its_timeout_is_dropped_and_not_called_again_while_it_runs():
    release = threading.Event()
    path = Path(release=release)
    guard = PathGuard("dense", path, query_embedder=Embedder(), timeout_s=0.05)
    assert guard.run(query="leave") == {"documents": [], "degraded": ["dense"]}
    assert guard.run(query="again") == {"documents": [], "degraded": ["dense"]}
    assert len(path.calls) == 1  # the second request never reached the busy path
    release.set()
    guard._running.join(timeout=30)
    assert guard.run(query="leave") == {"documents": DOCS, "degraded": []}


def test_filters_the_store_cannot_apply_are_the_requests_fault_and_raised():
    with pytest.raises(FilterError):
        PathGuard("bm25", Path(FilterError("bad filter")), query_embedder=Embedder()).run(query="x")


def test_its_inputs_are_the_retrievers_with_the_embedders_query_in_place_of_the_embedding():
    assert set(input_sockets(PathGuard("dense", Path(), query_embedder=Embedder()))) == {"query", "filters"}
    bm25 = BM25sRetriever(document_store=InMemoryDocumentStore())
    assert set(input_sockets(PathGuard("bm25", bm25))) == set(input_sockets(bm25))


def test_settings_are_checked():
    with pytest.raises(ValueError, match="timeout_s must be None or > 0"):
        PathGuard("dense", Path(), timeout_s=0)
    with pytest.raises(ValueError, match="takes no query_embedding"):
        PathGuard("bm25", BM25sRetriever(document_store=InMemoryDocumentStore()), query_embedder=Embedder())


def test_to_dict_round_trips():
    bm25 = BM25sRetriever(document_store=InMemoryDocumentStore(), top_k=7)
    data = PathGuard("bm25", bm25, timeout_s=2.0).to_dict()
    assert data == {
        "type": "components.retrievers.path_guard.PathGuard",
        "init_parameters": {"path": "bm25", "retriever": bm25.to_dict(), "query_embedder": None, "timeout_s": 2.0},
    }
    pipeline = Pipeline()
    pipeline.add_component("bm25", PathGuard("bm25", bm25, timeout_s=2.0))
    restored = Pipeline.loads(pipeline.dumps(), allowed_modules=["components"]).get_component("bm25")
    assert (restored.path, restored.timeout_s, restored.retriever.top_k) == ("bm25", 2.0, 7)
