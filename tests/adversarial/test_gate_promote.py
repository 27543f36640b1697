"""Issue 42, section 2: the gate and promotion, run through the real CLI against a real MLflow store (sqlite).

A limit that passes every regression (NaN) or any (inf), runs that answered different data sets gated on
their plain means, a paired CI over questions that only share ids, and checks passed over without a trace on
the version.
"""

import pytest
from mlflow.tracking import MlflowClient

from pipelines.run_layout import OVERRIDES_TAG, STUDY_PART_TAG
from tests.support.cli import last_line, ragtune
from tests.support.mlflow_runs import logged_run, questions
from tests.support.promotable import promotable

DEMO_EN, DEMO_ZH = ("demo-en", "a" * 64), ("demo-zh", "b" * 64)
BAD_LIMIT = "error: argument --max-regression: must be a finite number >= 0, not"


def on_data_set(client: MlflowClient, run_id: str, data_set: tuple[str, str]) -> str:
    """Tags the run with its data set's name and fingerprint, as run.py does (runner._tag_identity)."""
    client.set_tag(run_id, "ragtune.dataset", data_set[0])
    client.set_tag(run_id, "ragtune.dataset_fingerprint", data_set[1])
    return run_id


def asked_elsewhere(records: list[dict]) -> list[dict]:
    """The same ids asking other questions: two sets generated apart both number theirs `gen-0001`..."""
    return [{**record, "question": f"another {record['question']}"} for record in records]


def run_on(mlflow_store: tuple, tmp_path, name: str, records: list[dict], data_set: tuple | None = None
           ) -> str:
    """A finished run with per-question records, tagged with its data set when one is given."""
    _, client, experiment = mlflow_store
    run_id = logged_run(client, experiment, name, records, tmp_path)
    return run_id if data_set is None else on_data_set(client, run_id, data_set)


def gate(uri: str, baseline: str, candidate: str, *more: str) -> int:
    return ragtune("gate", "--baseline", baseline, "--candidate", candidate, "--tracking-uri", uri, *more)


@pytest.mark.parametrize("limit", ["nan", "inf", "-inf", "-0.1"])
def test_the_gate_refuses_a_limit_that_is_not_a_finite_number_of_at_least_zero(limit, tmp_path, capsys,
                                                                                mlflow_store):
    baseline = run_on(mlflow_store, tmp_path, "baseline", questions(10, f1=0.6, recall=0.9))
    worse = run_on(mlflow_store, tmp_path, "worse", questions(10, f1=0.2, recall=0.5))
    assert gate(mlflow_store[0], baseline, worse, f"--max-regression={limit}") == 2
    out, err = capsys.readouterr()
    assert out == "" and last_line(err) == f"ragtune gate: {BAD_LIMIT} {limit!r}"


@pytest.mark.parametrize("limit", ["nan", "inf"])
def test_promote_refuses_a_limit_that_would_pass_any_regression(limit, tmp_path, capsys, mlflow_store):
    uri, client, experiment = mlflow_store
    run = promotable(client, experiment, "run", 0.6, tmp_path)
    assert ragtune("promote", run, "--name", "rag", "--tracking-uri", uri, f"--max-regression={limit}") == 2
    assert last_line(capsys.readouterr().err) == f"ragtune promote: {BAD_LIMIT} {limit!r}"
    assert client.search_registered_models() == []  # nothing registered, nothing tagged


def test_the_gate_refuses_runs_of_different_data_sets_naming_both(tmp_path, capsys, mlflow_store):
    uri = mlflow_store[0]
    baseline = run_on(mlflow_store, tmp_path, "en", questions(10, f1=0.6, recall=0.9), DEMO_EN)
    better_elsewhere = asked_elsewhere(questions(10, f1=0.9, recall=0.9))
    candidate = run_on(mlflow_store, tmp_path, "zh", better_elsewhere, DEMO_ZH)
    assert gate(uri, baseline, candidate) == 2
    out, err = capsys.readouterr()
    assert out == ""  # no verdict, no CI
    assert last_line(err) == (f"gate: cannot judge: the runs answered different data sets: baseline "
                              f"{baseline} on demo-en (fingerprint aaaaaaaaaaaa), candidate {candidate} on "
                              "demo-zh (fingerprint bbbbbbbbbbbb)")

    # A run that records no fingerprint cannot be shown to have answered the same set either.
    bare = run_on(mlflow_store, tmp_path, "bare", questions(10, f1=0.9, recall=0.9))
    assert gate(uri, baseline, bare) == 2
    assert f"candidate {bare} on an unnamed data set (no fingerprint recorded)" in capsys.readouterr().err

    # Parts of one golden set hold other questions, so their runs differ too; the line names the part.
    dev = run_on(mlflow_store, tmp_path, "dev", questions(10, f1=0.9, recall=0.9), ("demo-en", "c" * 64))
    mlflow_store[1].log_param(dev, "dataset.holdout.use", "dev")
    assert gate(uri, baseline, dev) == 2
    assert f"candidate {dev} on demo-en, dev part (fingerprint cccccccccccc)" in capsys.readouterr().err


def test_a_paired_ci_is_never_printed_over_questions_that_only_share_ids(tmp_path, capsys, mlflow_store):
    """Runs logged without data set tags (by hand) are still gated on means, but the paired CI needs the same
    questions: ids reused by another set make no pairs."""
    baseline = run_on(mlflow_store, tmp_path, "a", questions(10, f1=0.6, recall=0.9))
    candidate = run_on(mlflow_store, tmp_path, "b", asked_elsewhere(questions(10, f1=0.6, recall=0.9)))
    assert gate(mlflow_store[0], baseline, candidate) == 0
    out = capsys.readouterr().out
    assert "ok   answer    answer/f1: 0.610 -> 0.610" in out and "CI" not in out


def test_paired_ci_lines_say_over_how_many_questions(tmp_path, capsys, mlflow_store):
    baseline = run_on(mlflow_store, tmp_path, "a", questions(10, f1=0.6, recall=0.9), DEMO_EN)
    candidate = run_on(mlflow_store, tmp_path, "b", questions(10, f1=0.6, recall=0.88), DEMO_EN)
    assert gate(mlflow_store[0], baseline, candidate) == 0
    out = capsys.readouterr().out
    assert "ok   retrieval retrieval/recall_at_10: 0.900 -> 0.880" in out
    assert "diff 95% CI [-0.020, -0.020], p=0.002, n=10" in out


def test_promotion_across_data_sets_is_refused_unless_forced_and_the_force_is_recorded(tmp_path, capsys,
                                                                                         mlflow_store):
    uri, client, experiment = mlflow_store
    args = ["--name", "rag", "--tracking-uri", uri]
    production = on_data_set(client, promotable(client, experiment, "en", 0.6, tmp_path), DEMO_EN)
    assert ragtune("promote", production, *args) == 0
    other = on_data_set(client, promotable(client, experiment, "zh", 0.9, tmp_path), DEMO_ZH)
    capsys.readouterr()

    assert ragtune("promote", other, *args) == 2
    out, err = capsys.readouterr()
    mismatch = (f"the runs answered different data sets: baseline {production} on demo-en (fingerprint "
                f"aaaaaaaaaaaa), candidate {other} on demo-zh (fingerprint bbbbbbbbbbbb)")
    assert out == ""
    assert last_line(err) == (f"promote: refused: cannot judge: {mismatch} (--force promotes anyway, "
                              "recorded on the version)")
    assert str(client.get_model_version_by_alias("rag", "production").version) == "1"

    assert ragtune("promote", other, *args, "--force") == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == (f"promote: rag version 2 (run {other}) is now rag@production; gate "
                                   f"against rag@production: cannot judge: {mismatch}")
    assert f"promote: --force recorded on the version: cannot judge: {mismatch}" in out
    version = client.get_model_version_by_alias("rag", "production")
    assert str(version.version) == "2" and version.tags["ragtune.gate"] == "forced"
    assert version.tags["ragtune.gate_override"] == "true"
    assert version.tags["ragtune.dataset_changed"] == mismatch
    assert version.tags["ragtune.dataset_fingerprint"] == "b" * 64


def test_no_test_split_is_recorded_on_the_version_and_printed(tmp_path, capsys, mlflow_store):
    uri, client, experiment = mlflow_store
    parent = client.create_run(experiment, run_name="study").info.run_id
    chosen = promotable(client, experiment, "chosen", 0.6, tmp_path)
    client.set_tag(chosen, "mlflow.parentRunId", parent)
    client.set_tag(chosen, OVERRIDES_TAG, "dataset.holdout.use=dev retriever.top_k=10")
    client.log_param(chosen, "dataset.holdout.use", "dev")
    assert ragtune("promote", chosen, "--name", "rag", "--tracking-uri", uri, "--no-test-split") == 0
    why = (f"run {chosen} was chosen on the dev part of its golden set (dataset.holdout.use=dev), and no "
           "finished run of the same configuration on the test part is in its sweep")
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith(f"promote: rag version 1 (run {chosen}) is now rag@production")
    assert f"promote: --no-test-split recorded on the version: {why}\n" in out
    version = client.get_model_version_by_alias("rag", "production")
    assert version.tags["ragtune.test_split_waived"] == why
    assert f"--no-test-split: {why}" in version.description


def test_a_trial_of_a_study_without_a_test_part_cannot_pass_the_promote_check(tmp_path, capsys, mlflow_store):
    """A study run with hydra.sweeper.holdout=false tunes on every question: nothing ever checks its choice."""
    uri, client, experiment = mlflow_store
    chosen = promotable(client, experiment, "chosen", 0.6, tmp_path)
    client.set_tag(chosen, OVERRIDES_TAG, "retriever.top_k=10")
    client.set_tag(chosen, STUDY_PART_TAG, "all")
    client.log_param(chosen, "dataset.holdout.use", "all")
    assert ragtune("promote", chosen, "--name", "rag", "--tracking-uri", uri) == 1
    assert last_line(capsys.readouterr().err).startswith(
        f"promote: refused: run {chosen} was chosen by a search over every question of its golden set "
        "(hydra.sweeper.holdout=false): no test part checked it")
    assert client.search_registered_models() == []
    assert ragtune("promote", chosen, "--name", "rag", "--tracking-uri", uri, "--no-test-split") == 0
    version = client.get_model_version_by_alias("rag", "production")
    assert "no test part checked it" in version.tags["ragtune.test_split_waived"]


def test_compare_skips_the_paired_tests_of_runs_whose_questions_only_share_ids(tmp_path, capsys,
                                                                                mlflow_store):
    baseline = run_on(mlflow_store, tmp_path, "a", questions(10, f1=0.6, recall=0.9))
    candidate = run_on(mlflow_store, tmp_path, "b", asked_elsewhere(questions(10, f1=0.6, recall=0.9)))
    chart = tmp_path / "compared" / "chart.png"
    uri = mlflow_store[0]
    assert ragtune("compare", baseline, candidate, "--tracking-uri", uri, "--out", str(chart)) == 0
    out, err = capsys.readouterr()
    assert last_line(err) == (f"compare: paired tests skipped for b ({candidate[:6]}): the two runs share "
                              "no question (11 question ids match, asking other questions); were they run on "
                              "the same golden set?")
    assert "95% CI" not in out and "+0.000, +0.000" not in out
    assert [path.name for path in chart.parent.iterdir()] == ["chart.png"]
