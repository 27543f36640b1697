import pytest
from haystack import Document
from haystack.document_stores.in_memory import InMemoryDocumentStore

from components.context.sentence_window_expander import SentenceWindowExpander
from components.context.token_budget import token_count
from components.preprocessors.chunk_span_locator import ChunkSpanLocator
from components.preprocessors.sentence_window_splitter import SentenceWindowSplitter

EN = (
    "Annual leave is fifteen days a year. Ask your manager early. Carry-over is capped at five days. "
    "Sick leave is separate and unlimited. Parental leave is twenty weeks."
)
ZH = "员工每年有十五天带薪年假。病假需要提供医院证明。年假可以顺延到下一年。婚假为十天需提前申请。产假为九十八天。"
TEXTS = {"en": EN, "zh": ZH}


@pytest.fixture
def indexed():
    """Five sentences per document, as the sentence_window ingest chain stores them."""
    sources = [Document(id=name, content=text, meta={"doc_id": name}) for name, text in TEXTS.items()]
    units = SentenceWindowSplitter(min_chars=5).run(documents=sources)["documents"]
    chunks = ChunkSpanLocator().run(chunks=units, sources=sources)["documents"]
    store = InMemoryDocumentStore()
    store.write_documents(chunks)
    return store, {(c.meta["doc_id"], c.meta["sentence_id"]): c for c in chunks}


def hit(chunks, doc, sentence, score):
    chunk = chunks[doc, sentence]
    return Document(id=chunk.id, content=chunk.content, meta=dict(chunk.meta), score=score)


@pytest.mark.parametrize("doc", ["en", "zh"])
def test_a_hit_becomes_its_window_with_the_hits_id_score_and_meta(indexed, doc):
    store, chunks = indexed
    (widened,) = SentenceWindowExpander(store, window_size=1).run(documents=[hit(chunks, doc, 2, 0.7)])[
        "documents"
    ]
    first, last = chunks[doc, 1], chunks[doc, 3]
    start, end = first.meta["span"][0], last.meta["span"][1]
    assert widened.content == TEXTS[doc][start:end] == first.content + chunks[doc, 2].content + last.content
    assert widened.meta["span"] == [start, end]
    assert (widened.id, widened.score, widened.meta["sentence_id"]) == (chunks[doc, 2].id, 0.7, 2)


def test_a_window_stops_at_the_documents_ends(indexed):
    store, chunks = indexed
    (widened,) = SentenceWindowExpander(store, window_size=2).run(documents=[hit(chunks, "en", 0, 1.0)])[
        "documents"
    ]
    assert widened.content == "".join(chunks["en", i].content for i in range(3))
    assert widened.meta["span"] == [0, chunks["en", 2].meta["span"][1]]


def test_overlapping_windows_merge_at_the_better_ranked_hit_and_others_keep_their_order(indexed):
    store, chunks = indexed
    hits = [
        hit(chunks, "en", 3, 0.9),
        hit(chunks, "zh", 0, 0.8),
        hit(chunks, "en", 1, 0.5),
        hit(chunks, "en", 4, 0.4),
    ]
    widened = SentenceWindowExpander(store, window_size=1).run(documents=hits)["documents"]
    assert [(d.id, d.score) for d in widened] == [(chunks["en", 3].id, 0.9), (chunks["zh", 0].id, 0.8)]
    assert widened[0].content == EN and widened[0].meta["span"] == [0, len(EN)]
    assert widened[1].content == chunks["zh", 0].content + chunks["zh", 1].content


def test_windows_that_only_touch_stay_apart(indexed):
    store, chunks = indexed
    hits = [hit(chunks, "en", 0, 0.9), hit(chunks, "en", 3, 0.5)]
    widened = SentenceWindowExpander(store, window_size=1).run(documents=hits)["documents"]
    assert [d.meta["span"] for d in widened] == [
        [0, chunks["en", 1].meta["span"][1]],
        [chunks["en", 2].meta["span"][0], len(EN)],
    ]


def test_nothing_in_nothing_out_and_a_hit_without_sentence_numbers_is_refused(indexed):
    store, _ = indexed
    expander = SentenceWindowExpander(store)
    assert expander.run(documents=[]) == {"documents": []}
    with pytest.raises(ValueError, match="sentence_id"):
        expander.run(
            documents=[Document(content="a chunk of another index", meta={"doc_id": "en", "span": [0, 5]})]
        )


@pytest.mark.parametrize("doc", ["en", "zh"])
def test_max_tokens_keeps_whole_windows_best_first_while_they_fit(indexed, doc):
    store, chunks = indexed
    hits = [hit(chunks, doc, 4, 0.9), hit(chunks, doc, 0, 0.8)]  # windows 3-4 and 0-1: apart
    full = SentenceWindowExpander(store, window_size=1).run(documents=hits)["documents"]
    sizes = [token_count(d.content) for d in full]
    assert len(full) == 2 and all(sizes)

    def capped(max_tokens):
        expander = SentenceWindowExpander(store, window_size=1, max_tokens=max_tokens)
        return expander.run(documents=hits)["documents"]

    assert capped(sum(sizes)) == full
    assert capped(sum(sizes) - 1) == capped(1) == full[:1]  # never cut; the best kept whatever its size


def test_rejects_a_window_below_one():
    with pytest.raises(ValueError, match="window_size"):
        SentenceWindowExpander(InMemoryDocumentStore(), window_size=0)


def test_to_dict_holds_every_init_parameter_and_from_dict_restores_them():
    store = InMemoryDocumentStore()
    data = SentenceWindowExpander(store, window_size=2, max_tokens=800).to_dict()
    assert data == {
        "type": "components.context.sentence_window_expander.SentenceWindowExpander",
        "init_parameters": {"document_store": store.to_dict(), "window_size": 2, "max_tokens": 800},
    }
    clone = SentenceWindowExpander.from_dict(data)
    assert isinstance(clone.retriever.document_store, InMemoryDocumentStore) and clone.to_dict() == data
