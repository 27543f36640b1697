from types import SimpleNamespace

from haystack.document_stores.in_memory import InMemoryDocumentStore

from experiments.evaluation.report import print_results
from experiments.runs.runner import _stage_rows
from pipelines.builder import build_pipeline
from tests.support.shipped import composed

RANKS = ("hit", "recall", "precision", "mrr", "map", "ndcg")


def metrics_for(views: list[str]) -> dict[str, float]:
    metrics = {"eval/judged_questions": 3, "time/index_seconds": 1.0, "index/cache_hit": 0, "index/chunks": 9,
               "time/eval_seconds": 2.0, "latency/p50_ms": 5.0, "latency/p95_ms": 9.0}
    for view in views:
        metrics |= {f"{view}/{m}_at_10": 0.5 for m in RANKS}
    return metrics


def test_stages_print_in_pipeline_order_and_none_slots_say_so(tmp_path, capsys):
    built = build_pipeline(composed("pipeline=hybrid").pipeline, {"store": InMemoryDocumentStore(), "index_dir": str(tmp_path)})
    rows = _stage_rows(built)
    assert rows[-2:] == [("fusion", False), ("reranker", True)] and ("bm25", False) in rows
    metrics = metrics_for(["retrieval", *(f"stage/{name}" for name, _ in rows)])
    print_results("hybrid", SimpleNamespace(name="demo", language="en"), metrics, [10], rows)
    lines = [line for line in capsys.readouterr().out.splitlines() if "stage " in line]
    assert [line.split("│")[1].strip() for line in lines][-2:] == ["stage fusion @10",
                                                                   "stage reranker (none: as above) @10"]
