import mlflow
from mlflow.tracking import MlflowClient

from experiments import compare


def make_runs(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    mlflow.set_tracking_uri(uri)
    client = MlflowClient()
    experiment = client.create_experiment("demo", artifact_location=(tmp_path / "artifacts").as_uri())
    parent = client.create_run(experiment, run_name="sweep")
    ids = []
    for name, mrr in (("bm25", 0.8), ("hybrid", 0.9)):
        run = client.create_run(experiment, run_name=name, tags={"mlflow.parentRunId": parent.info.run_id})
        client.log_metric(run.info.run_id, "retrieval/mrr_at_10", mrr)
        client.log_metric(run.info.run_id, "latency/p95_ms", 12.0)
        client.set_terminated(run.info.run_id)
        ids.append(run.info.run_id)
    return uri, parent.info.run_id, ids


def test_compare_run_ids_prints_a_table_and_writes_a_chart(tmp_path, capsys):
    uri, _, ids = make_runs(tmp_path)
    out = tmp_path / "chart.png"
    compare.main([*ids, "--tracking-uri", uri, "--out", str(out), "--markdown",
                  "--metrics", "retrieval/mrr_at_10", "latency/p95_ms"])
    printed = capsys.readouterr().out
    assert "| bm25" in printed and "0.900" in printed
    assert out.stat().st_size > 5_000


def test_compare_a_sweep_logs_the_chart_to_its_parent(tmp_path):
    uri, parent, _ = make_runs(tmp_path)
    compare.main(["--parent", parent, "--tracking-uri", uri, "--out", str(tmp_path / "sweep.png")])
    frame = compare.comparison_frame(compare.child_runs(MlflowClient(), parent), ["retrieval/mrr_at_10"])
    assert sorted(frame["retrieval/mrr_at_10"]) == [0.8, 0.9]
    assert {a.path for a in MlflowClient().list_artifacts(parent)} == {"sweep.png", "sweep.csv"}
