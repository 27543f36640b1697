from experiments.comparison import gate
from tests.support.mlflow_runs import logged_run, questions


def test_gate_passes_within_threshold_and_fails_naming_the_regressed_layer(tmp_path, capsys, mlflow_store):
    uri, client, experiment = mlflow_store
    baseline = logged_run(client, experiment, "baseline", questions(30, f1=0.60, recall=0.90), tmp_path)
    close = logged_run(client, experiment, "close", questions(30, f1=0.58, recall=0.90), tmp_path)
    worse = logged_run(client, experiment, "worse", questions(30, f1=0.40, recall=0.90, refused_unanswerable=0.0), tmp_path)
    args = ["--baseline", baseline, "--tracking-uri", uri, "--max-regression", "0.05"]

    assert gate.main([*args, "--candidate", close]) == gate.EXIT_OK
    assert "gate: passed" in capsys.readouterr().out

    assert gate.main([*args, "--candidate", worse]) == gate.EXIT_REGRESSED
    out, err = capsys.readouterr()
    assert "FAIL answer    answer/f1: 0.610 -> 0.410" in out and "p=0.00" in out
    assert "answer/f1 (answer), answer/refusal_accuracy (answer)" in err
    assert "retrieval/recall_at_10 (retrieval)" not in err


def test_lower_is_better_metrics_regress_upwards():
    verdicts, skipped = gate.judge_runs(
        {"answer/false_refusal_rate": 0.05}, {"answer/false_refusal_rate": 0.20}, max_regression=0.1
    )
    assert [v.metric for v in verdicts] == ["answer/false_refusal_rate"]
    assert verdicts[0].failed and round(verdicts[0].regression, 3) == 0.15
    assert len(skipped) == 4 and "answer/f1 (answer): not logged by the baseline and the candidate" in skipped


def test_layers_only_one_run_logged_are_skipped_and_named(tmp_path, capsys, mlflow_store):
    uri, client, experiment = mlflow_store
    baseline = logged_run(client, experiment, "baseline", questions(5, f1=0.6, recall=0.9), tmp_path)
    retrieval_only = logged_run(client, experiment, "retrieval", [{"id": "q0", "retrieval/recall_at_10": 1.0}], tmp_path)
    code = gate.main(["--baseline", baseline, "--candidate", retrieval_only, "--tracking-uri", uri])
    out = capsys.readouterr().out
    assert code == gate.EXIT_OK
    assert "ok   retrieval retrieval/recall_at_10: 0.900 -> 1.000" in out
    assert "skip answer/f1 (answer): not logged by the candidate" in out
    assert "gate: layers skipped (not logged by both runs): context, answer" in out


def test_two_retrieval_only_runs_are_gated_on_retrieval(tmp_path, capsys, mlflow_store):
    uri, client, experiment = mlflow_store
    runs = [
        logged_run(client, experiment, name, [{"id": "q0", "retrieval/recall_at_10": recall}], tmp_path)
        for name, recall in (("bm25", 0.9), ("hybrid", 0.7))
    ]
    code = gate.main(["--baseline", runs[0], "--candidate", runs[1], "--tracking-uri", uri])
    assert code == gate.EXIT_REGRESSED
    assert "FAIL retrieval retrieval/recall_at_10: 0.900 -> 0.700" in capsys.readouterr().out


def test_gate_cannot_judge_runs_sharing_no_headline_metric_or_unknown_runs(tmp_path, capsys, mlflow_store):
    uri, client, experiment = mlflow_store
    answer_only = logged_run(client, experiment, "answer", [{"id": "q0", "answer/f1": 0.5}], tmp_path)
    retrieval_only = logged_run(client, experiment, "retrieval", [{"id": "q0", "retrieval/recall_at_10": 1.0}], tmp_path)
    code = gate.main(["--baseline", answer_only, "--candidate", retrieval_only, "--tracking-uri", uri])
    assert code == gate.EXIT_UNJUDGEABLE
    assert "gate: cannot judge: the runs share no headline metric" in capsys.readouterr().err
    assert gate.main(["--baseline", answer_only, "--candidate", "nope", "--tracking-uri", uri]) == gate.EXIT_UNJUDGEABLE
    assert "gate: cannot read runs" in capsys.readouterr().err
