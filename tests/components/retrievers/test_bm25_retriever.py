import math
import os
import shutil
from collections import Counter
from pathlib import Path

import bm25s
import numpy as np
import pytest
from haystack import Document, Pipeline
from haystack.document_stores.in_memory import InMemoryDocumentStore
from haystack.document_stores.types import FilterPolicy, apply_filter_policy
from haystack.errors import FilterError

from components.common.text import Tokenizer
from components.retrievers import bm25_retriever, document_masks
from components.retrievers.bm25_retriever import BM25sRetriever, term_ids

DOCS = [
    Document(id="a#0-10", content="Hybrid retrieval fuses sparse and dense results.", meta={"tenant": "t1"}),
    Document(
        id="b#0-10", content="Sparse retrieval with BM25 ranks exact keyword matches.", meta={"tenant": "t2"}
    ),
    Document(id="c#0-10", content="Dense retrieval embeds queries and passages.", meta={"tenant": "t1"}),
    Document(id="d#0-10", content="混合检索结合稀疏检索和稠密检索。", meta={"tenant": "t2"}),
    Document(
        id="e#0-10", content="Cooking pasta needs salted water.", meta={"tenant": "t1"}, embedding=[0.1, 0.2]
    ),
    Document(id="f#0-10", content=None, meta={"tenant": "t1"}),
]


@pytest.fixture()
def store() -> InMemoryDocumentStore:
    store = InMemoryDocumentStore()
    store.write_documents(DOCS)
    return store


def _ids(result: dict) -> list[str]:
    return [doc.id for doc in result["documents"]]


def _lucene_scores(query: str, k1: float = 1.5, b: float = 0.75) -> dict[str, float]:
    """Reference BM25 (Lucene variant) computed by hand with the same tokeniser."""
    tokenizer = Tokenizer()
    corpus = {doc.id: tokenizer.tokenize(doc.content or "") for doc in DOCS}
    avgdl = sum(len(tokens) for tokens in corpus.values()) / len(corpus)
    scores = {}
    for doc_id, tokens in corpus.items():
        counts = Counter(tokens)
        score = 0.0
        for term in tokenizer.tokenize(query):
            df = sum(term in other for other in corpus.values())
            if not counts[term]:
                continue
            idf = math.log(1 + (len(corpus) - df + 0.5) / (df + 0.5))
            score += idf * counts[term] / (counts[term] + k1 * (1 - b + b * len(tokens) / avgdl))
        if score > 0:
            scores[doc_id] = score
    return scores


class TestRun:
    def test_scores_equal_reference_bm25_and_are_sorted(self, store):
        result = BM25sRetriever(store).run(query="sparse retrieval")
        expected = _lucene_scores("sparse retrieval")
        assert _ids(result) == sorted(expected, key=lambda doc_id: -expected[doc_id])
        for doc in result["documents"]:
            assert doc.score == pytest.approx(expected[doc.id], rel=1e-5)

    def test_documents_without_any_query_term_are_never_returned(self, store):
        assert _ids(BM25sRetriever(store, top_k=100).run(query="pasta")) == ["e#0-10"]

    @pytest.mark.parametrize("query", ["", "   ", "?!。", "unknownterm", "the"])
    def test_queries_without_indexed_terms_return_nothing(self, store, query):
        assert BM25sRetriever(store).run(query=query) == {"documents": []}

    def test_top_k(self, store):
        retriever = BM25sRetriever(store, top_k=1)
        assert len(retriever.run(query="retrieval")["documents"]) == 1
        assert len(retriever.run(query="retrieval", top_k=2)["documents"]) == 2
        assert retriever.run(query="retrieval", top_k=0) == {"documents": []}
        with pytest.raises(ValueError, match="top_k"):
            retriever.run(query="retrieval", top_k=-1)

    def test_chinese_query_matches_through_jieba(self, store):
        assert _ids(BM25sRetriever(store).run(query="稠密检索")) == ["d#0-10"]

    def test_ties_are_broken_by_id(self):
        store = InMemoryDocumentStore()
        store.write_documents([Document(id=i, content="same words here") for i in ("z", "m", "a")])
        assert _ids(BM25sRetriever(store, top_k=2).run(query="words")) == ["a", "m"]

    def test_returns_copies_without_embedding(self, store):
        retriever = BM25sRetriever(store)
        first = retriever.run(query="pasta")["documents"][0]
        second = retriever.run(query="salted pasta")["documents"][0]
        assert first.id == second.id and first is not second
        assert first.score < second.score and first.embedding is None
        assert store.filter_documents({"field": "id", "operator": "==", "value": "e#0-10"})[0].score is None

    def test_runs_in_a_pipeline_without_explicit_warm_up(self, store):
        pipe = Pipeline()
        pipe.add_component("bm25", BM25sRetriever(store, top_k=2))
        assert _ids(pipe.run({"bm25": {"query": "dense retrieval"}})["bm25"]) == ["c#0-10", "a#0-10"]

    def test_empty_store(self):
        assert BM25sRetriever(InMemoryDocumentStore()).run(query="anything") == {"documents": []}


class TestFilters:
    def test_filtered_out_documents_are_never_returned(self, store):
        retriever = BM25sRetriever(store, top_k=100)
        tenant = {"field": "meta.tenant", "operator": "==", "value": "t2"}
        assert _ids(retriever.run(query="retrieval", filters=tenant)) == ["b#0-10"]
        assert _ids(retriever.run(query="pasta", filters=tenant)) == []

    def test_logical_filters_and_cached_masks(self, store, monkeypatch):
        retriever = BM25sRetriever(store, top_k=100)
        filters = {
            "operator": "AND",
            "conditions": [
                {"field": "meta.tenant", "operator": "==", "value": "t1"},
                {"field": "id", "operator": "!=", "value": "a#0-10"},
            ],
        }
        assert _ids(retriever.run(query="retrieval", filters=filters)) == ["c#0-10"]
        monkeypatch.setattr(document_masks, "document_matches_filter", _fail)
        monkeypatch.setattr(document_masks, "field_value", _fail)
        assert _ids(retriever.run(query="dense retrieval", filters=filters)) == ["c#0-10"]

    def test_no_filter_after_filter(self, store):
        retriever = BM25sRetriever(store, top_k=100)
        retriever.run(query="retrieval", filters={"field": "meta.tenant", "operator": "==", "value": "t2"})
        assert len(retriever.run(query="retrieval")["documents"]) == 3

    def test_init_filters_merge_so_a_query_can_only_narrow_them(self, store):
        t1 = {"field": "meta.tenant", "operator": "==", "value": "t1"}
        t2 = {"field": "meta.tenant", "operator": "==", "value": "t2"}
        retriever = BM25sRetriever(store, top_k=100, filters=t1)
        assert sorted(_ids(retriever.run(query="retrieval"))) == ["a#0-10", "c#0-10"]
        # Haystack's own MERGE keeps only the runtime filter when both compare the same field: ours ANDs them.
        assert apply_filter_policy(FilterPolicy.MERGE, t1, t2) == t2
        assert _ids(retriever.run(query="retrieval", filters=t2)) == []
        replacing = BM25sRetriever(store, top_k=100, filters=t1, filter_policy="replace")
        assert _ids(replacing.run(query="retrieval", filters=t2)) == ["b#0-10"]

    def test_init_filters_round_trip_and_are_checked_when_built(self, store):
        t1 = {"field": "meta.tenant", "operator": "==", "value": "t1"}
        data = BM25sRetriever(store, filters=t1, filter_policy="replace").to_dict()
        assert data["init_parameters"]["filters"] == t1 and data["init_parameters"]["filter_policy"] == "replace"
        restored = BM25sRetriever.from_dict(data)
        assert restored.filters == t1 and restored.filter_policy == FilterPolicy.REPLACE
        with pytest.raises(FilterError, match="unknown filter operator"):
            BM25sRetriever(store, filters={"field": "meta.tenant", "value": "t1"})

    def test_malformed_filter_raises(self, store):
        with pytest.raises(Exception, match="operator"):
            BM25sRetriever(store).run(query="retrieval", filters={"field": "meta.tenant", "value": "t1"})


class TestIndexDir:
    def test_second_warm_up_loads_the_saved_index(self, store, tmp_path, monkeypatch):
        first = BM25sRetriever(store, index_dir=str(tmp_path))
        expected = first.run(query="sparse retrieval")
        published = [path.name for path in tmp_path.iterdir()]
        assert len(published) == 1 and published[0].startswith("bm25s-")
        assert (tmp_path / published[0] / bm25_retriever.DOC_IDS_FILE).exists()

        monkeypatch.setattr(BM25sRetriever, "_build", _fail)
        second = BM25sRetriever(store, index_dir=str(tmp_path))
        assert second.run(query="sparse retrieval") == expected

    def test_settings_and_corpus_change_the_cache_key(self, store, tmp_path):
        BM25sRetriever(store, index_dir=str(tmp_path)).warm_up()
        BM25sRetriever(store, k1=1.2, index_dir=str(tmp_path)).warm_up()
        BM25sRetriever(store, stopwords="en", index_dir=str(tmp_path)).warm_up()
        store.write_documents([Document(id="g#0-1", content="new chunk")])
        BM25sRetriever(store, index_dir=str(tmp_path)).warm_up()
        assert len(list(tmp_path.iterdir())) == 4

    def test_losing_the_publish_race_uses_the_winner(self, store, tmp_path, monkeypatch):
        real_rename = os.rename

        def parallel_job_wins(src, dst):
            shutil.copytree(src, dst)
            real_rename(src, dst)  # the target exists now, so this raises like a lost race

        monkeypatch.setattr(bm25_retriever.os, "rename", parallel_job_wins)
        retriever = BM25sRetriever(store, index_dir=str(tmp_path))
        assert _ids(retriever.run(query="pasta")) == ["e#0-10"]
        assert [path.name.startswith("bm25s-") for path in tmp_path.iterdir()] == [True]

    def test_empty_corpus_is_cached_too(self, tmp_path):
        empty = InMemoryDocumentStore()
        empty.write_documents([Document(id="x", content="?!")])
        BM25sRetriever(empty, index_dir=str(tmp_path)).warm_up()
        assert BM25sRetriever(empty, index_dir=str(tmp_path)).run(query="x") == {"documents": []}

    def test_index_for_other_documents_is_rejected(self, store, tmp_path):
        retriever = BM25sRetriever(store, index_dir=str(tmp_path))
        retriever.warm_up()
        (folder,) = tmp_path.iterdir()
        (folder / bm25_retriever.DOC_IDS_FILE).write_text('["other"]', encoding="utf-8")
        with pytest.raises(RuntimeError, match=str(Path(folder.name))):
            BM25sRetriever(store, index_dir=str(tmp_path)).warm_up()


class TestLifecycle:
    def test_warm_up_reads_the_store_once(self, store, monkeypatch):
        calls = []
        real = store.filter_documents
        monkeypatch.setattr(store, "filter_documents", lambda *a, **kw: calls.append(1) or real(*a, **kw))
        retriever = BM25sRetriever(store)
        retriever.warm_up()
        retriever.warm_up()
        retriever.run(query="pasta")
        assert len(calls) == 1

    def test_to_dict_from_dict_round_trip(self, store, tmp_path):
        retriever = BM25sRetriever(
            store,
            top_k=3,
            k1=1.2,
            b=0.5,
            method="robertson",
            language="en",
            stopwords="en",
            index_dir=str(tmp_path),
        )
        data = retriever.to_dict()
        assert data == {
            "type": "components.retrievers.bm25_retriever.BM25sRetriever",
            "init_parameters": {
                "document_store": store.to_dict(),
                "top_k": 3,
                "k1": 1.2,
                "b": 0.5,
                "method": "robertson",
                "language": "en",
                "stopwords": "en",
                "index_dir": str(tmp_path),
                "filters": None,
                "filter_policy": "merge",
            },
        }
        clone = BM25sRetriever.from_dict(data)
        assert isinstance(clone.document_store, InMemoryDocumentStore)
        expected = {k: v for k, v in data["init_parameters"].items() if k not in ("document_store", "filter_policy")}
        assert {name: getattr(clone, name) for name in expected} == expected
        assert clone.filter_policy == FilterPolicy.MERGE and clone.to_dict() == data

    def test_to_dict_with_defaults(self, store):
        assert BM25sRetriever(store).to_dict() == {
            "type": "components.retrievers.bm25_retriever.BM25sRetriever",
            "init_parameters": {
                "document_store": store.to_dict(),
                "top_k": 10,
                "k1": 1.5,
                "b": 0.75,
                "method": "lucene",
                "language": "auto",
                "stopwords": None,
                "index_dir": None,
                "filters": None,
                "filter_policy": "merge",
            },
        }

    def test_tokenizer_identity(self, store):
        retriever = BM25sRetriever(store, language="en", stopwords="en")
        assert retriever.tokenizer_identity() == Tokenizer(language="en", stopwords="en").identity()

    @pytest.mark.parametrize(
        ("kwargs", "parameter"),
        [
            ({"document_store": object()}, "document_store"),
            ({"top_k": 0}, "top_k"),
            ({"k1": -1}, "k1"),
            ({"b": 1.5}, "b"),
            ({"method": "bm42"}, "method"),
            ({"language": "fr"}, "language"),
            ({"stopwords": "de"}, "stopwords"),
        ],
    )
    def test_invalid_parameters_are_named(self, store, kwargs, parameter):
        with pytest.raises((TypeError, ValueError), match=parameter):
            BM25sRetriever(**{"document_store": store, **kwargs})


def _fail(*args, **kwargs):
    raise AssertionError("must not be called")


def test_term_ids_number_each_term_once_in_order_of_appearance():
    ids, vocabulary = term_ids(Tokenizer(), ["a b", "", "C a"])
    assert vocabulary == {"a": 0, "b": 1, "c": 2}
    assert [list(doc) for doc in ids] == [[0, 1], [], [2, 0]]


def test_the_tokenizer_source_is_unchanged_so_no_cached_bm25_index_is_rebuilt():
    """Its digest keys every cached BM25 index, those inside promoted bundles too (components/common/text.py)."""
    assert Tokenizer().identity()["code"] == "256f313ebfd0"  # change it only on purpose, said in the CHANGELOG


@pytest.mark.parametrize("method", ["lucene", "robertson", "bm25+"])
def test_the_index_built_from_term_ids_scores_as_bm25s_own_build_from_terms(method):
    """The retriever builds from int32 term ids (memory), bm25s from the terms themselves: same scores, bit for bit."""
    texts = ["The cat of the house", "the dog", "", "history of Rome, of the empire", "the zebra runs", "tax of cats"]
    retriever = BM25sRetriever(document_store=InMemoryDocumentStore(), method=method)
    ours = retriever._build(texts)
    theirs = bm25s.BM25(method=method)
    theirs.index([Tokenizer().tokenize(t) for t in texts], show_progress=False)
    for query in (["the"], ["of", "the", "zebra"], ["cats", "dog", "empire"], ["absent"]):
        np.testing.assert_array_equal(
            ours.get_scores_from_ids(ours.get_tokens_ids(query)),
            theirs.get_scores_from_ids(theirs.get_tokens_ids(query)),
        )
