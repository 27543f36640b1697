import mlflow
import pandas as pd
import pytest
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


def test_paired_comparison_prints_diff_ci_and_p_and_logs_to_the_candidate(tmp_path, capsys):
    from tests.experiments.mlflow_runs import logged_run, questions, tracking

    uri, client, experiment = tracking(tmp_path)
    baseline = logged_run(client, experiment, "baseline", questions(40, f1=0.5, recall=0.8), tmp_path)
    candidate = logged_run(client, experiment, "candidate", questions(40, f1=0.7, recall=0.8), tmp_path)
    compare.main([baseline, candidate, "--tracking-uri", uri, "--out", str(tmp_path / "out" / "chart.png")])
    printed = capsys.readouterr().out
    row = next(line for line in printed.splitlines() if line.startswith("│ answer/f1 "))
    assert "+0.200" in row and "[+0.200, +0.200]" in row and "│ 0.001 │ 40 │" in row
    assert "retrieval/recall_at_10" in printed
    stem = f"paired_{candidate[:8]}_vs_{baseline[:8]}"
    frame = pd.read_csv(tmp_path / "out" / f"{stem}.csv", index_col="metric")
    assert frame.loc["answer/f1", "diff"] == pytest.approx(0.2) and frame.loc["retrieval/recall_at_10", "p_value"] == 1.0
    assert (tmp_path / "out" / f"{stem}.png").stat().st_size > 5_000
    logged = {a.path for a in client.list_artifacts(candidate, "compare")}
    assert logged == {f"compare/{stem}.csv", f"compare/{stem}.png"}


def test_a_sweep_id_alone_compares_each_child_with_the_first(tmp_path):
    from tests.experiments.mlflow_runs import logged_run, questions, tracking

    uri, client, experiment = tracking(tmp_path)
    parent = client.create_run(experiment, run_name="sweep").info.run_id
    first = logged_run(client, experiment, "a", questions(10, f1=0.5, recall=0.8), tmp_path, parent=parent)
    second = logged_run(client, experiment, "b", questions(10, f1=0.6, recall=0.8), tmp_path, parent=parent)
    compare.main([parent, "--tracking-uri", uri, "--out", str(tmp_path / "sweep.png")])
    logged = {a.path for a in client.list_artifacts(parent, "compare")}
    assert logged == {f"compare/paired_{second[:8]}_vs_{first[:8]}.csv", f"compare/paired_{second[:8]}_vs_{first[:8]}.png"}
