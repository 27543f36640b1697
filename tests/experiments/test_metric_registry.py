"""The metric declarations: every name a run logs has one, and reads as better the way it did before the registry.

`tests/fixtures/logged_metric_names.json` holds every metric name that real runs logged (metrics.json and the
per-question scores of per_question.jsonl, for five pipelines), each with what `lower_is_better` answered before the
registry replaced experiments/evaluation/metric_names.py (tests/fixtures/README.md says how it was made).
"""

import ast
import json

import pytest

from experiments.evaluation.metric_registry import Direction, Layer, MetricInfo, declare, find
from experiments.runs.metric_catalog import DECLARING_MODULES, METRICS, describe, lower_is_better
from tests.support.paths import ROOT

LOGGED = json.loads((ROOT / "tests" / "fixtures" / "logged_metric_names.json").read_text(encoding="utf-8"))


def info(name: str) -> MetricInfo:
    return MetricInfo(name, Layer.RUN, Direction.NEITHER, "", "tests")


def test_every_logged_name_is_lower_or_higher_is_better_as_before():
    assert len(LOGGED) > 500
    changed = {name: old for name, old in LOGGED.items() if lower_is_better(name) != old}
    assert changed == {}


def test_every_logged_name_has_exactly_one_best_declaration():
    assert [name for name in LOGGED if describe(name) is None] == []
    ties = []
    for name in LOGGED:
        ranks = sorted(((m.name == name, m.fixed_text), m.name) for m in METRICS if m.matches(name))
        if len(ranks) > 1 and ranks[-1][0] == ranks[-2][0]:
            ties.append(f"{name}: {ranks[-1][1]} or {ranks[-2][1]}")
    assert ties == []


def test_every_declaration_covers_a_logged_name_or_a_pipeline_this_fixture_lacks():
    unused = {m.name for m in METRICS if not any(describe(name) is m for name in LOGGED)}
    # Logged only with a judge, a rewritten question that has key tokens (none in the fixture's runs), an
    # incremental index update, views a pipeline names (no shipped one does), guarded retrieval paths or the agent's
    # floor answer (the fixture's runs were logged before them).
    assert unused == {
        "agent/answered_by/<who>",
        "retrieval/degraded",
        "retrieval/degraded_rate",
        "answer/faithfulness",
        "answer/response_relevancy",
        "answer/judge_failed",
        "query/fidelity",
        "index/{reused,ingested,removed}_documents",
        "<view>/{hit,recall,precision,mrr,map,ndcg}_at_<k>",
    }


def test_names_match_their_variable_parts():
    stage = info("stage/<component>/{hit,recall}_at_<k>")
    assert stage.matches("stage/bm25/recall_at_10") and stage.matches("stage/a/b/hit_at_1")
    assert not stage.matches("stage/bm25/mrr_at_10") and not stage.matches("stage/bm25/recall_at_k")
    assert info("answer/f1").matches("answer/f1") and not info("answer/f1").matches("answer/f1/ci95_low")
    assert info("a.b").pattern.pattern == r"a\.b"  # fixed text is literal


def test_an_exact_declaration_wins_then_the_pattern_with_the_most_fixed_text():
    metrics = [info("<view>/recall_at_<k>"), info("retrieval/recall_at_<k>"), info("retrieval/recall_at_10")]
    assert find("retrieval/recall_at_10", metrics) is metrics[2]
    assert find("retrieval/recall_at_5", metrics) is metrics[1]
    assert find("stage/bm25/recall_at_5", metrics) is metrics[0]
    assert find("answer/f1", metrics) is None and describe("answer/never_logged") is None
    assert not lower_is_better("answer/never_logged")


def test_a_metric_is_declared_once_from_the_module_that_computes_it():
    assert describe("answer/f1").module == "experiments.evaluation.answer_metrics"
    assert describe("time/index_seconds").module == "experiments.runs.job_metrics"
    with pytest.raises(ValueError, match="declared twice"):
        declare("answer/f1", Layer.ANSWER, Direction.HIGHER, "again")


def test_the_catalog_imports_every_module_that_declares_metrics():
    declaring = set()
    for path in (ROOT / "experiments").rglob("*.py"):
        calls = [
            node
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "declare"
        ]
        if calls:
            declaring.add(".".join(path.relative_to(ROOT).with_suffix("").parts))
    assert declaring == {module.__name__ for module in DECLARING_MODULES}


def test_every_metric_says_what_it_measures():
    assert [m.name for m in METRICS if len(m.description) < 10] == []
    assert {m.layer for m in METRICS} == set(Layer)
