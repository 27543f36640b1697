"""Real MLflow runs (sqlite store) with run-level metrics and a per_question.jsonl artifact, as run.py logs them."""

import json
from pathlib import Path

import mlflow
from mlflow.tracking import MlflowClient


def tracking(tmp_path: Path) -> tuple[str, MlflowClient, str]:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    mlflow.set_tracking_uri(uri)
    client = MlflowClient()
    experiment = client.create_experiment("demo", artifact_location=(tmp_path / "artifacts").as_uri())
    return uri, client, experiment


def logged_run(client: MlflowClient, experiment: str, name: str, per_question: list[dict], tmp_path: Path,
               parent: str | None = None) -> str:
    tags = {"mlflow.parentRunId": parent} if parent else {}
    run_id = client.create_run(experiment, run_name=name, tags=tags).info.run_id
    metrics = {}
    for key in {k for record in per_question for k in record if "/" in k}:
        values = [r[key] for r in per_question if key in r]
        metrics[key] = sum(values) / len(values)
    for key, value in metrics.items():
        client.log_metric(run_id, key, value)
    (tmp_path / name).mkdir(exist_ok=True)
    target = tmp_path / name / "per_question.jsonl"
    target.write_text("".join(json.dumps(r) + "\n" for r in per_question))
    client.log_artifact(run_id, str(target))
    client.set_terminated(run_id)
    return run_id


def line(qid: str, answerable: bool = True, latency_ms: float = 10.0, **scores: float) -> dict:
    """One per_question.jsonl line as run.py writes it; `scores` by their logged names, with `__` for `/`."""
    return {"id": qid, "question": f"question {qid}?", "category": "fact" if answerable else "unanswerable",
            "answerable": answerable, "latency_ms": latency_ms,
            **{name.replace("__", "/"): value for name, value in scores.items()}, "layer": "ok"}


def questions(n: int, f1: float, recall: float, refused_unanswerable: float = 1.0) -> list[dict]:
    """Per-question lines as run.py writes them: n answerable questions, then one unanswerable."""
    rows = [
        line(f"q{i}", latency_ms=10.0 + i, answer__f1=f1 if i % 2 else f1 + 0.02, retrieval__recall_at_10=recall,
             context__recall_at_10=recall, answer__false_refusal_rate=0.0)
        for i in range(n)
    ]
    return [*rows, line("u1", answerable=False, latency_ms=10.0 + n, answer__refusal_accuracy=refused_unanswerable)]
