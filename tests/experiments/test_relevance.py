import pytest
from haystack import Document

from experiments.datasets.golden.evidence import locate_evidence
from experiments.datasets.golden.items import EvidenceSpan, GoldenItem
from experiments.evaluation.relevance import Judged, judge, locate


def chunk(doc_id: str, start: int, end: int) -> Document:
    return Document(id=f"{doc_id}#{start}-{end}", content="x", meta={"doc_id": doc_id, "span": [start, end]})


def quote_item(*spans: tuple[EvidenceSpan, ...]) -> GoldenItem:
    return GoldenItem(
        id="q", question="?", evidence=tuple(f"quote {i}" for i in range(len(spans))), evidence_spans=spans
    )


QUOTE = (EvidenceSpan("a", 100, 200),)  # length 100: a chunk needs >= 50 characters of it


def test_overlap_threshold_boundary():
    item = quote_item(QUOTE)
    assert judge([chunk("a", 150, 400)], item).gains == (1,)  # exactly half
    assert judge([chunk("a", 151, 400)], item).gains == (0,)  # just under half
    assert judge([chunk("a", 0, 149)], item).gains == (0,)
    assert judge([chunk("a", 120, 130)], item).gains == (0,)  # inside but too small
    assert judge([chunk("a", 0, 1000)], item).gains == (1,)  # contains it
    assert judge([chunk("b", 100, 200)], item).gains == (0,)  # same span, other document
    assert judge([chunk("a", 120, 130)], item, min_overlap=0.1).gains == (1,)
    assert judge([chunk("a", 150, 400)], item, min_overlap=0.6).gains == (0,)


def test_unit_credited_only_to_first_covering_chunk():
    item = quote_item(QUOTE, (EvidenceSpan("a", 300, 310),))
    ranking = [
        chunk("b", 0, 50),
        chunk("a", 90, 210),
        chunk("a", 80, 220),
        chunk("a", 0, 400),
        chunk("a", 305, 320),
    ]
    judged = judge(ranking, item)
    assert judged == Judged(
        gains=(0, 1, 0, 1, 0),
        n_units=2,
        mode="quote",
        ids=("b#0-50", "a#90-210", "a#80-220", "a#0-400", "a#305-320"),
    )


def test_one_chunk_may_cover_several_units():
    item = quote_item(QUOTE, (EvidenceSpan("a", 210, 220),), (EvidenceSpan("z", 0, 5),))
    assert judge([chunk("a", 0, 500), chunk("z", 0, 5)], item).gains == (2, 1)


def test_any_location_of_a_quote_counts():
    item = quote_item((EvidenceSpan("a", 100, 200), EvidenceSpan("b", 0, 100)))
    assert judge([chunk("c", 0, 100), chunk("b", 40, 90), chunk("a", 100, 200)], item).gains == (0, 1, 0)


def test_doc_mode_collapses_chunks_to_documents_by_first_occurrence():
    item = GoldenItem(id="d", question="?", relevant_doc_ids=("b", "c", "c"))
    ranking = [chunk("a", 0, 10), chunk("b", 0, 10), chunk("a", 10, 20), chunk("b", 10, 20), chunk("c", 0, 5)]
    assert judge(ranking, item) == Judged(gains=(0, 1, 1), n_units=2, mode="doc", ids=("a", "b", "c"))
    assert judge([], item) == Judged(gains=(), n_units=2, mode="doc", ids=())


def test_doc_mode_needs_no_span():
    item = GoldenItem(id="d", question="?", relevant_doc_ids=("b",))
    whole_doc = Document(id="b", content="full text", meta={"doc_id": "b"})
    assert judge([whole_doc], item).gains == (1,)


def test_evidence_takes_precedence_over_relevant_doc_ids():
    item = GoldenItem(
        id="q", question="?", evidence=("quote",), evidence_spans=(QUOTE,), relevant_doc_ids=("a", "b")
    )
    assert judge([chunk("a", 0, 10)], item).mode == "quote"


def test_items_without_units_are_not_judged():
    assert judge([chunk("a", 0, 10)], GoldenItem(id="u", question="?", reference_answer="no idea")) is None


def test_gains_do_not_depend_on_chunking():
    text = "Intro. " * 30 + "The warranty lasts  two\nyears from purchase. " + "Filler text. " * 40
    (item,) = locate_evidence(
        [GoldenItem(id="w", question="?", evidence=("warranty lasts two years",))],
        [Document(id="doc", content=text, meta={"doc_id": "doc"})],
        "mem",
    )
    for size, overlap in ((50, 0), (64, 16), (200, 100), (1000, 0)):
        chunks = [chunk("doc", s, min(s + size, len(text))) for s in range(0, len(text), size - overlap)]
        covering = [c for c in chunks if judge([c], item).gains == (1,)]
        assert covering, size
        ranking = [chunk("other", 0, 10), *covering, *chunks]
        assert judge(ranking, item).gains[:2] == (0, 1)
        assert sum(judge(ranking, item).gains) == 1


def test_errors_name_the_item():
    unlocated = GoldenItem(id="raw", question="?", evidence=("quote",))
    with pytest.raises(ValueError, match="golden item 'raw': evidence not located"):
        judge([chunk("a", 0, 10)], unlocated)
    with pytest.raises(ValueError, match="min_overlap"):
        judge([], quote_item(QUOTE), min_overlap=0)


CORPUS = {"a": "x" * 100 + "Full-time employees accrue 20 days of paid annual leave per year." + "y" * 100, "b": "other"}


def test_a_document_without_span_is_judged_where_its_text_sits_in_the_corpus():
    quote = CORPUS["a"][100:165]
    item = quote_item((EvidenceSpan("a", 100, 165),))
    strip = Document(id="s1", content=quote, meta={"doc_id": "a"})  # a compressed strip: exact substring
    assert locate(strip, CORPUS) == ("a", 100, 165)
    assert judge([strip], item, corpus=CORPUS).gains == (1,)
    # text that was cut away is not credited: a strip holding under half of the quote gains nothing
    cut = Document(id="s2", content=quote[:20], meta={"doc_id": "a"})
    assert judge([cut], item, corpus=CORPUS).gains == (0,)
    # without a doc id the whole corpus is searched
    assert locate(Document(content=quote), CORPUS) == ("a", 100, 165)
    # text found nowhere (a generated HyDE passage, a web result) is non-relevant, never an error
    generated = Document(id="h1", content="A hypothetical answer about leave.")
    assert locate(generated, CORPUS) is None
    assert judge([generated, strip], item, corpus=CORPUS).gains == (0, 1)
    # without a corpus, span-less entries simply gain nothing
    assert judge([strip], item).gains == (0,)


def test_doc_mode_places_span_less_documents_by_their_text():
    item = GoldenItem(id="d", question="?", relevant_doc_ids=("a",))
    found = Document(id="s", content=CORPUS["a"][100:130])
    lost = Document(id="h", content="made up")
    judged = judge([lost, found], item, corpus=CORPUS)
    assert judged.gains == (0, 1) and judged.ids == ("unlocated:h", "a")


def test_an_item_marked_unanswerable_is_not_judged():
    item = GoldenItem(id="q", question="?", relevant_doc_ids=("a",), answerable=False)
    assert judge([Document(id="a#0-1", content="x", meta={"doc_id": "a", "span": [0, 1]})], item) is None


def row(citation: str) -> Document:
    """A table row as the agent's sql_query tool returns it: no span, its citation as doc_id."""
    return Document(id=citation, content="leave_allowance\nannual_days: 20", meta={"doc_id": citation, "source": "sql"})


def test_table_rows_are_units_credited_by_their_id_next_to_the_quotes():
    item = GoldenItem(id="q", question="?", evidence=("quote",), evidence_spans=(QUOTE,),
                      rows=("sql:leave_allowance/4", "sql:it_assets/1"))
    ranking = [row("sql:leave_allowance/4"), row("sql:leave_allowance/4"), row("sql:offices/SEA"), chunk("a", 100, 200)]
    judged = judge(ranking, item)
    assert judged.n_units == 3 and judged.gains == (1, 0, 0, 1)  # a row repeated or not named gains nothing
    rows_only = GoldenItem(id="r", question="?", rows=("sql:it_assets/1",))
    assert judge([chunk("a", 0, 50), row("sql:it_assets/1")], rows_only).gains == (0, 1)
    assert judge([row("sql:it_assets/1")], GoldenItem(id="u", question="?", rows=("sql:it_assets/1",),
                                                       answerable=False)) is None
