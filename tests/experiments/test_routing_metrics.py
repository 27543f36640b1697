import matplotlib.image
import pytest

from experiments.evaluation.routing_metrics import confusion, routed_wrong, routing_summary, write_confusion
from tests.support.records import record

RECORDS = [
    record({"expected_route": "no_retrieval", "route": "no_retrieval", "latency_ms": 3.0, "cost/llm_calls": 0.0}),
    record({"expected_route": "single_step", "route": "single_step", "latency_ms": 300.0, "cost/llm_calls": 1.0}),
    record({"expected_route": "multi_step", "route": "single_step", "latency_ms": 500.0, "cost/llm_calls": 1.0}),
    record({"expected_route": "decompose", "route": "decompose", "latency_ms": 1500.0, "cost/llm_calls": 2.0}),
]


@pytest.mark.parametrize(("expected", "routed", "wrong"), [
    ("no_retrieval", "no_retrieval", False), ("no_retrieval", "single_step", True), ("clarify", "no_retrieval", True),
    ("clarify", None, True),  # no router: it retrieved for a vague question
    ("single_step", "no_retrieval", True), ("multi_step", "single_step", False), (None, "clarify", False),
])
def test_a_question_is_routed_wrong_only_where_the_route_cannot_serve_it(expected, routed, wrong):
    assert routed_wrong(expected, routed) is wrong


def test_accuracy_and_cost_and_latency_per_route():
    metrics = routing_summary(RECORDS)
    assert metrics["router/accuracy"] == 0.75 and metrics["router/labelled_questions"] == 4
    assert metrics["cost/llm_calls_per_question/route/single_step"] == 1.0
    assert metrics["cost/llm_calls_per_question/route/no_retrieval"] == 0.0
    assert metrics["latency/route/decompose/p95_ms"] == 1500.0
    assert "cost/prompt_tokens_per_question/route/decompose" not in metrics  # not recorded, not invented
    crag = [record({"expected_route": "single_step", "route": "correct", "latency_ms": 1.0})]
    assert "router/accuracy" not in routing_summary(crag) and "latency/route/correct/p50_ms" in routing_summary(crag)


def test_the_confusion_matrix_is_written_as_csv_and_png(tmp_path):
    assert confusion(RECORDS)[("multi_step", "single_step")] == 1
    csv, png = write_confusion(RECORDS, tmp_path, "adaptive")
    lines = csv.read_text().splitlines()
    assert lines[0] == "labelled\\routed,no_retrieval,clarify,single_step,decompose,multi_step"
    assert lines[5] == "multi_step,0,0,1,0,0"
    assert matplotlib.image.imread(png).shape[0] > 300
    assert write_confusion([record({"route": "correct", "latency_ms": 1.0})], tmp_path, "crag") == []
