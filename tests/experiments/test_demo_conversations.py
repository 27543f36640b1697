"""Checks of data/demo/golden_conversations.jsonl: the demo's conversational and comparison golden items.

The file is loaded the way `dataset.kind=demo` loads its golden set (the converted corpus, then `load_golden`),
so every quote is located in the text the index is built from.

The ellipsis checks use the project's own terms (`components.common.sentences.content_terms`: lowercased words
without English stopwords, jieba words for Chinese), minus single Han characters (年, 的, 批: too ambiguous
to stand for a topic). A follow-up like "And for part-timers?" necessarily carries the attribute that
distinguishes its answer ("part"), so "the question shares no term with the quote" would be false of good
items. What is checked instead, per `multi_turn` item:

- the topic keyword the history introduces (`x_topic`) is in the history, tied to the first evidence quote,
  and absent from the follow-up, both as text and as terms;
- the history supplies at least one *distinctive* term of that quote (a term found in at most 5% of the
  language's corpus sentences) that the follow-up lacks, i.e. the history is what points retrieval at it.

`multi_turn_standalone` items are the opposite: their question names a new topic that the history never
mentions and carries distinctive terms of its quote by itself, so a rewriter must leave it as it is.
"""

import json
import re
from collections import Counter
from itertools import pairwise

import pytest

from components.common.sentences import content_terms, split_sentences
from components.common.words import HAN
from experiments.datasets.demo import DEMO_DIR
from experiments.datasets.golden.evidence import load_golden
from experiments.datasets.golden.items import GoldenItem
from experiments.datasets.local import load_corpus
from pipelines.conversion import AUTO_ENCODING

PATH = DEMO_DIR / "golden_conversations.jsonl"
LANGUAGES = ("en", "zh")
ID_PATTERN = re.compile(r"(en|zh)-(mt|cmp)-\d{3}")
MULTI_TURN, STANDALONE, COMPARISON = "multi_turn", "multi_turn_standalone", "comparison"
MINIMUM_PER_LANGUAGE = {MULTI_TURN: 14, STANDALONE: 2, COMPARISON: 3}
MINIMUM_COMPARISONS = 8
DISTINCTIVE_SHARE = 0.05


def terms(text: str) -> set[str]:
    return {term for term in content_terms(text) if not HAN.fullmatch(term)}


def history_text(item: GoldenItem) -> str:
    return " ".join(turn["content"] for turn in item.history)


@pytest.fixture(scope="module")
def documents():
    documents, skipped = load_corpus(DEMO_DIR / "corpus", "**/*", None, AUTO_ENCODING)
    return documents, skipped


@pytest.fixture(scope="module")
def items(documents) -> list[GoldenItem]:
    """Loading raises GoldenError listing every quote that is not found, so loading is the first check."""
    return load_golden(PATH, *documents)


@pytest.fixture(scope="module")
def sentence_counts(documents) -> dict[str, tuple[int, Counter]]:
    """language -> (number of corpus sentences, in how many sentences each term occurs)."""
    counts: dict[str, tuple[int, Counter]] = {}
    for lang in LANGUAGES:
        sentences = [
            s for doc in documents[0] if doc.id.startswith(f"{lang}/") for s in split_sentences(doc.content)
        ]
        counts[lang] = (len(sentences), Counter(term for s in sentences for term in terms(s)))
    return counts


def distinctive(text: str, lang: str, sentence_counts) -> set[str]:
    total, frequency = sentence_counts[lang]
    return {term for term in terms(text) if frequency[term] <= DISTINCTIVE_SHARE * total}


def test_items_are_answerable_and_located_in_their_language(items):
    for item in items:
        lang = item.id[:2]
        assert ID_PATTERN.fullmatch(item.id), item.id
        assert item.category in MINIMUM_PER_LANGUAGE, (item.id, item.category)
        assert item.answerable is True, item.id
        assert item.reference_answer and item.reference_answer.strip(), item.id
        assert item.evidence and len(item.evidence_spans) == len(item.evidence), item.id
        if item.source is not None:
            assert item.source.startswith(f"{lang}/"), item.id
        for quote, spans in zip(item.evidence, item.evidence_spans, strict=True):
            # One location, in the item's own language: `dataset.subset` re-locates quotes within that language.
            assert len(spans) == 1, f"{item.id}: quote found {len(spans)} times: {quote!r}"
            assert spans[0].doc_id.startswith(f"{lang}/"), f"{item.id}: quote in {spans[0].doc_id}"


def test_ids_do_not_collide_with_the_main_golden_set(items):
    with (DEMO_DIR / "golden.jsonl").open(encoding="utf-8") as handle:
        main_ids = {json.loads(line)["id"] for line in handle if line.strip()}
    assert not main_ids & {item.id for item in items}


def test_counts_per_language_and_category(items):
    per = Counter((item.id[:2], item.category) for item in items)
    for lang in LANGUAGES:
        for category, minimum in MINIMUM_PER_LANGUAGE.items():
            assert per[lang, category] >= minimum, (lang, category, per)
    assert sum(per[lang, COMPARISON] for lang in LANGUAGES) >= MINIMUM_COMPARISONS, per


def test_history_is_well_formed(items):
    for item in items:
        if item.category == COMPARISON:
            assert not item.history, f"{item.id}: a comparison item is a single-turn question"
            continue
        assert len(item.history) in (2, 4), (
            f"{item.id}: history must hold one or two user/assistant exchanges"
        )
        for index, turn in enumerate(item.history):
            assert isinstance(turn, dict) and set(turn) == {"role", "content"}, (item.id, turn)
            assert turn["role"] == ("user" if index % 2 == 0 else "assistant"), (item.id, index, turn["role"])
            assert isinstance(turn["content"], str) and turn["content"].strip(), (item.id, index)
        assert item.history[-1]["role"] == "assistant", item.id


def test_comparison_items_cite_separate_places(items):
    for item in items:
        if item.category != COMPARISON:
            continue
        assert len(item.evidence) >= 2, item.id
        spans = sorted((spans[0] for spans in item.evidence_spans), key=lambda s: (s.doc_id, s.start))
        for first, second in pairwise(spans):
            assert first.doc_id != second.doc_id or first.end <= second.start, f"{item.id}: quotes overlap"


def topic_items(items, category):
    """(item, its x_topic, question, history text, first quote) for every item of `category`; at least one."""
    chosen = [item for item in items if item.category == category]
    assert chosen
    for item in chosen:
        topic = item.extra.get("x_topic")
        assert isinstance(topic, str) and topic.strip(), f"{item.id}: x_topic missing"
        yield item, topic, item.question, history_text(item), item.evidence[0]


def test_follow_up_leaves_out_what_the_history_supplies(items, sentence_counts):
    for item, topic, question, history, quote in topic_items(items, MULTI_TURN):
        assert topic.casefold() in history.casefold(), f"{item.id}: the history never mentions {topic!r}"
        assert topic.casefold() in quote.casefold() or terms(topic) & terms(quote), (
            f"{item.id}: topic {topic!r} is unrelated to the evidence quote"
        )
        assert topic.casefold() not in question.casefold(), (
            f"{item.id}: the follow-up names the topic {topic!r}"
        )
        assert not terms(topic) & terms(question), (
            f"{item.id}: the follow-up shares {terms(topic) & terms(question)}"
        )
        key_terms = distinctive(quote, item.id[:2], sentence_counts)
        supplied = (key_terms & terms(history)) - terms(question)
        assert supplied, (
            f"{item.id}: the history adds no distinctive term of the quote {sorted(key_terms)} "
            f"that the follow-up lacks"
        )


def test_standalone_follow_up_is_complete_by_itself(items, sentence_counts):
    for item, topic, question, history, quote in topic_items(items, STANDALONE):
        assert topic.casefold() in question.casefold(), f"{item.id}: the question does not name {topic!r}"
        assert topic.casefold() in quote.casefold(), f"{item.id}: topic {topic!r} not in the evidence quote"
        assert topic.casefold() not in history.casefold() and not terms(topic) & terms(history), (
            f"{item.id}: the history already talks about {topic!r}, so the question switches no topic"
        )
        assert distinctive(quote, item.id[:2], sentence_counts) & terms(question), (
            f"{item.id}: the question alone carries no distinctive term of its quote"
        )
