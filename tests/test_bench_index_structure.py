"""benchmarks/index_structure.py: packing widened hits into an equal token budget, and the leave-one-set-out choice
of the default strategy."""

import pytest
from haystack import Document

from benchmarks.index_structure import BASELINE, available, choose, filled, loso, pack, summary, token_count
from experiments.evaluation.context_metrics import context_tokens


def words(text: str) -> int:
    return len(text.split())


def hit(text: str, span: list[int] | None = None) -> Document:
    return Document(content=text, meta={"doc_id": "d", **({"span": span} if span else {})})


def test_hits_go_in_whole_best_first_until_one_does_not_fit_which_is_cut_and_ends_the_context():
    hits = [hit("a b c"), hit("d e"), hit("f g h i"), hit("j")]
    packed = pack(hits, 7, words)
    assert [doc.content.split() for doc in packed] == [["a", "b", "c"], ["d", "e"], ["f", "g"]]
    assert sum(words(doc.content) for doc in packed) == 7  # "j" would fit, but the cut hit ends the context


def test_a_first_hit_over_the_budget_is_cut_and_a_context_under_the_budget_takes_every_hit():
    assert [doc.content.split() for doc in pack([hit("a b c d"), hit("e")], 2, words)] == [["a", "b"]]
    assert [doc.content for doc in pack([hit("a b"), hit("c")], 10, words)] == ["a b", "c"]


def test_a_cut_hit_keeps_an_exact_span_only_when_its_text_was_its_span():
    exact, prefixed = (
        pack([hit("one two three", [100, 113])], 2, words),
        pack([hit("Title > one two", [5, 12])], 2, words),
    )
    assert exact[0].meta["span"] == [100, 100 + len(exact[0].content)] and exact[0].content.startswith(
        "one two"
    )
    assert "span" not in prefixed[0].meta and prefixed[0].meta["doc_id"] == "d"


@pytest.mark.parametrize(
    "text",
    [
        "The leave policy grants twenty days of annual leave to every employee. " * 4,
        "年假为每年二十天，入职满一年后可以申请。试用期员工不享受年假。" * 4,
    ],
)
def test_the_budget_is_counted_as_the_context_tokens_metric_counts(text):
    packed = pack([hit(text), hit(text)], 30)
    assert context_tokens(packed) == sum(token_count(doc.content) for doc in packed)
    assert 27 <= context_tokens(packed) <= 30  # a cut inside a word may leave a token or so unused
    assert len(packed) == 1


def merged_windows(hits):
    """A stand-in expand slot: each hit widened to "<hit> x x", a later hit of the same group joining the first."""
    groups = {}
    for doc in hits:
        groups.setdefault(doc.meta["group"], []).append(doc.content)
    return [Document(content=" ".join(f"{word} x x" for word in words)) for words in groups.values()]


def test_a_budget_is_filled_from_the_smallest_top_k_that_reaches_it():
    hits = [Document(content=w, meta={"group": g}) for w, g in [("a", 1), ("b", 2), ("c", 3), ("d", 1)]]
    # The top 2 widen to 6 words; widening all four would put the fourth hit's window into the first hit's place,
    # and packing 6 words of that would hand on "a x x d x x" instead of the second hit.
    assert [doc.content for doc in filled(hits, 6, merged_windows, words)] == ["a x x", "b x x"]
    assert [doc.content.split() for doc in filled(hits, 7, merged_windows, words)] == [
        ["a", "x", "x"],
        ["b", "x", "x"],
        ["c"],
    ]
    assert [doc.content for doc in pack(merged_windows(hits), 6, words)] == ["a x x d x x"]
    assert (
        sum(words(doc.content) for doc in filled(hits, 100, merged_windows, words)) == 12
    )  # every hit, under budget
    assert filled([], 100, merged_windows, words) == []


def test_a_strategy_replaces_the_baseline_only_when_it_wins_on_every_set():
    better_on_average = {
        "A": {BASELINE: 0.5, "wide": 0.9, "steady": 0.55},
        "B": {BASELINE: 0.5, "wide": 0.45, "steady": 0.52},
    }
    assert choose(better_on_average, [BASELINE, "wide", "steady"]) == "steady"
    assert choose(better_on_average, [BASELINE, "wide"]) == BASELINE
    assert (
        choose({"A": {BASELINE: 0.5, "same": 0.5}}, ["same", BASELINE]) == BASELINE
    )  # a tie keeps the baseline


def test_each_fold_is_chosen_on_the_other_sets_and_judged_on_its_own():
    scores = {
        "S1": {BASELINE: 0.50, "sw": 0.60},
        "S2": {BASELINE: 0.50, "sw": 0.55},
        "S3": {BASELINE: 0.40, "sw": 0.30},
    }
    folds = {fold.held_out: fold for fold in loso(scores, [BASELINE, "sw"])}
    assert {name: fold.chosen for name, fold in folds.items()} == {"S1": BASELINE, "S2": BASELINE, "S3": "sw"}
    assert folds["S3"].change == pytest.approx(0.30 / 0.40 - 1)
    assert folds["S1"].change == 0.0


def test_a_summary_counts_chunking_failures_only_where_the_answer_stage_ran():
    answered = [
        {"id": "1", "recall": 1.0, "tokens": 10, "f1": 0.5, "layer": "chunking"},
        {"id": "2", "recall": None, "tokens": 20, "f1": None, "layer": "ok"},
    ]
    assert summary(answered) == {"recall": 1.0, "f1": 0.5, "tokens": 15, "chunking": 1}
    assert summary([{"id": "1", "recall": 0.5, "tokens": 10}])["chunking"] is None


def test_strategies_run_only_where_this_tree_has_their_ingest_option(monkeypatch):
    from benchmarks import index_structure

    monkeypatch.setitem(index_structure.STRATEGIES, "imaginary", ["ingest=no_such_option"])
    assert available(["recursive", "imaginary"]) == ["recursive"]
