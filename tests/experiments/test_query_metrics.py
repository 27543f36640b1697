import pytest

from experiments.datasets.golden.items import GoldenItem
from experiments.evaluation.query_metrics import key_tokens, query_scores, query_summary
from tests.support.records import record


def test_key_tokens_are_numbers_ids_and_names_inside_a_sentence():
    assert key_tokens("Is SEV3 paged at night, and what about P2 in London?") == {"sev3", "p2", "london"}
    assert key_tokens("What does the $310 limit cover?") == {"$310"}
    assert key_tokens("How many days?") == set()
    assert key_tokens("P0 告警多久要响应？") == {"p0"}


def test_fidelity_counts_the_facts_of_the_question_and_of_the_users_earlier_turns():
    item = GoldenItem(id="f", question="And for P2?", history=({"role": "user", "content": "How fast must a P0 in Berlin be answered?"},
                                                                 {"role": "assistant", "content": "Within 15 minutes."}))
    kept = query_scores(item, {"queries": ["And for P2? P0 Berlin answered"], "fallback": False})
    assert kept == {"query/rewrites": 1.0, "query/rewritten": 1.0, "query/fallback": 0.0, "query/fidelity": 1.0}
    lost = query_scores(item, {"queries": ["And for P2? answered"]})
    assert lost["query/fidelity"] == pytest.approx(1 / 3)  # P2 kept; P0 and Berlin lost; the assistant's 15 not asked
    untouched = query_scores(item, {"question": "And for P2?"})  # a pass-through: no rewrites, no fidelity
    assert untouched == {"query/rewrites": 0.0, "query/rewritten": 0.0, "query/fallback": 0.0}


def test_summary_averages_rewrites_and_counts_fallbacks():
    records = [record({"query/rewrites": 2.0, "query/rewritten": 1.0, "query/fallback": 0.0, "query/fidelity": 0.5}),
               record({"query/rewrites": 0.0, "query/rewritten": 0.0, "query/fallback": 1.0})]
    assert query_summary(records) == {"query/rewrites_per_question": 1.0, "query/rewritten_share": 0.5,
                                      "query/fallbacks": 1.0, "query/fidelity": 0.5}
    assert query_summary([record({"retrieval/mrr_at_10": 1.0})]) == {}
