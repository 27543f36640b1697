from experiments import gate
from tests.experiments.mlflow_runs import logged_run, questions, tracking


def test_gate_passes_within_threshold_and_fails_naming_the_regressed_layer(tmp_path, capsys):
    uri, client, experiment = tracking(tmp_path)
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
    verdicts, problems = gate.judge_runs(
        {"answer/false_refusal_rate": 0.05}, {"answer/false_refusal_rate": 0.20}, max_regression=0.1
    )
    assert problems == [] and verdicts[0].failed and round(verdicts[0].regression, 3) == 0.15


def test_gate_cannot_judge_missing_metrics_or_runs(tmp_path, capsys):
    uri, client, experiment = tracking(tmp_path)
    baseline = logged_run(client, experiment, "baseline", questions(5, f1=0.6, recall=0.9), tmp_path)
    retrieval_only = logged_run(client, experiment, "retrieval", [{"id": "q0", "retrieval/recall_at_10": 1.0}], tmp_path)
    code = gate.main(["--baseline", baseline, "--candidate", retrieval_only, "--tracking-uri", uri])
    assert code == gate.EXIT_UNJUDGEABLE
    assert "answer/f1 (answer): the baseline has it but the candidate does not" in capsys.readouterr().err
    assert gate.main(["--baseline", baseline, "--candidate", "nope", "--tracking-uri", uri]) == gate.EXIT_UNJUDGEABLE
