"""ingest=semantic end to end on the demo with the real e5 embedder: a BM25-only pipeline still embeds to split
(its index holds no vectors), and every chunk locates in its document."""

from itertools import groupby

import pytest

from experiments.runs.config import validate
from experiments.runs.indexed import load_indexed_pipeline
from pipelines.errors import ConfigError
from tests.support.shipped import composed


@pytest.fixture(scope="module")
def indexed(tmp_path_factory):
    cache = tmp_path_factory.mktemp("cache")
    cfg = composed(
        "ingest=semantic",
        "pipeline=bm25",
        "answer=extractive",
        "+pipeline.answer=${answer.stage}",
        f"paths.cache={cache}",
    )
    return load_indexed_pipeline(validate(cfg))


@pytest.mark.slow  # e5 embeds every sentence group of the demo
def test_the_demo_is_cut_into_located_chunks_between_the_minimum_and_about_the_maximum(indexed):
    texts = {doc.id: doc.content for doc in indexed.dataset.documents}
    chunks = sorted(indexed.store.filter_documents(), key=lambda c: (c.meta["doc_id"], c.meta["span"]))
    assert len(texts) < len(chunks) and all(c.embedding is None for c in chunks)
    for doc_id, group in groupby(chunks, key=lambda c: c.meta["doc_id"]):
        units = list(group)
        for unit in units:
            start, end = unit.meta["span"]
            assert texts[doc_id][start:end] == unit.content
            assert len(units) == 1 or sum(not c.isspace() for c in unit.content) >= 100
        assert "".join(u.content for u in units) == texts[doc_id]  # contiguous: nothing lost, nothing twice
    median = sorted(len(c.content) for c in chunks)[len(chunks) // 2]
    assert median <= 500  # over ingest.chunk_size only where Haystack could not cut again


@pytest.mark.slow
def test_every_golden_quote_lies_in_the_chunks_of_its_document(indexed):
    covered = {
        (c.meta["doc_id"], i) for c in indexed.store.filter_documents() for i in range(*c.meta["span"])
    }
    spans = [span for item in indexed.dataset.golden for located in item.evidence_spans for span in located]
    assert spans and all((s.doc_id, i) in covered for s in spans for i in range(s.start, s.end))


def test_a_minimum_not_under_the_maximum_is_refused_naming_its_key():
    with pytest.raises(ConfigError, match="ingest.min_chunk_size"):
        validate(composed("ingest=semantic", "ingest.chunk_size=100"))
