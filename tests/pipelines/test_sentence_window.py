"""ingest=sentence_window end to end on the demo: sentences indexed, and the answer stage's context widened to their
windows. BM25 only and the extractive answerer, so nothing is embedded and no model loads."""

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
        "ingest=sentence_window",
        "ingest.window=1",
        "pipeline=bm25",
        "answer=extractive",
        "+pipeline.answer=${answer.stage}",
        f"paths.cache={cache}",
    )
    return load_indexed_pipeline(validate(cfg))


def test_the_demo_is_indexed_as_numbered_sentences_that_tile_each_document(indexed):
    texts = {doc.id: doc.content for doc in indexed.dataset.documents}
    chunks = sorted(indexed.store.filter_documents(), key=lambda c: (c.meta["doc_id"], c.meta["sentence_id"]))
    assert len(chunks) > 5 * len(texts)
    for doc_id, group in groupby(chunks, key=lambda c: c.meta["doc_id"]):
        units = list(group)
        assert [u.meta["sentence_id"] for u in units] == list(range(len(units))), doc_id
        assert "".join(u.content for u in units) == texts[doc_id]  # every character, so every span locates
        for unit in units:
            start, end = unit.meta["span"]
            assert texts[doc_id][start:end] == unit.content


def test_every_golden_quote_lies_in_the_chunks_of_its_document(indexed):
    chunks = indexed.store.filter_documents()
    covered = {(c.meta["doc_id"], i) for c in chunks for i in range(*c.meta["span"])}
    spans = [span for item in indexed.dataset.golden for located in item.evidence_spans for span in located]
    assert spans and all((s.doc_id, i) in covered for s in spans for i in range(s.start, s.end))


def test_the_answer_stage_gets_each_hit_with_its_neighbours(indexed):
    query = indexed.query
    outputs = query.run(question="How many days of annual leave do full-time employees get?")
    hits = query.documents_at(outputs, query.views["stage/context_window"])
    context = query.view_documents(outputs)["context"]
    assert hits and len(context) <= len(hits)
    assert sum(len(d.content) for d in context) > sum(len(d.content) for d in hits)
    assert all(d.meta["span"][1] - d.meta["span"][0] == len(d.content) for d in context)
    assert "20 days of paid annual leave" in query.answer(outputs).data


@pytest.mark.parametrize(("key", "value"), [("window", 0), ("min_chunk_size", -1)])
def test_a_bad_size_is_refused_naming_its_key(key, value):
    with pytest.raises(ConfigError, match=f"ingest.{key}"):
        validate(composed("ingest=sentence_window", f"ingest.{key}={value}"))
