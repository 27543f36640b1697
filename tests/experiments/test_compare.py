import mlflow
import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from experiments.comparison import compare
from experiments.runs.sweep import job_tags
from tests.support.mlflow_runs import line, logged_run, questions

CORPUS = "dataset.corpus_dir=/home/alice/projects/acme/kb/exports/2024-06/docs"


def make_runs(tmp_path, mlflow_store):
    """A sweep parent with two finished children, bm25 (job 0) and hybrid (job 1), on a local corpus."""
    uri, client, experiment = mlflow_store
    parent = client.create_run(experiment, run_name="sweep")
    ids = []
    for num, (name, mrr, latency) in enumerate((("bm25", 0.8, 12.0), ("hybrid", 0.9, 30.0))):
        tags = {"mlflow.parentRunId": parent.info.run_id, **job_tags(num, [CORPUS, f"pipeline={name}"])}
        run = client.create_run(experiment, run_name=f"{name} [{CORPUS}]", tags=tags)
        client.log_metric(run.info.run_id, "retrieval/mrr_at_10", mrr)
        client.log_metric(run.info.run_id, "latency/p95_ms", latency)
        client.set_terminated(run.info.run_id)
        ids.append(run.info.run_id)
    return uri, parent.info.run_id, ids


def table_rows(printed: str, separator: str) -> list[list[str]]:
    """The cells of every table row of the printed output, cut at `separator` (rich: '│', Markdown: '|')."""
    rows = [line.strip().strip(separator) for line in printed.splitlines() if line.strip().startswith(separator)]
    return [[cell.strip() for cell in row.split(separator)] for row in rows]


def test_compare_run_ids_labels_the_runs_by_what_differs(tmp_path, capsys, mlflow_store):
    uri, _, ids = make_runs(tmp_path, mlflow_store)
    out = tmp_path / "chart.png"
    compare.main([*ids, "--tracking-uri", uri, "--out", str(out), "--markdown",
                  "--metrics", "retrieval/mrr_at_10", "latency/p95_ms"])
    markdown = table_rows(capsys.readouterr().out, "|")
    assert markdown[0] == ["run", "retrieval/mrr_at_10", "latency/p95_ms"]
    assert markdown[2:] == [["bm25", "0.800", "12.000"], ["hybrid", "0.900", "30.000"]]
    assert out.stat().st_size > 5_000


def test_compare_a_sweep_writes_the_table_as_csv_and_logs_it_to_the_parent(tmp_path, capsys, mlflow_store):
    uri, parent, _ = make_runs(tmp_path, mlflow_store)
    compare.main(["--parent", parent, "--tracking-uri", uri, "--out", str(tmp_path / "sweep.png"),
                  "--metrics", "retrieval/mrr_at_10", "latency/p95_ms"])
    frame = pd.read_csv(tmp_path / "sweep.csv", index_col="run")
    assert frame.to_dict("index") == {
        "bm25": {"retrieval/mrr_at_10": 0.8, "latency/p95_ms": 12.0},
        "hybrid": {"retrieval/mrr_at_10": 0.9, "latency/p95_ms": 30.0},
    }
    rich_rows = table_rows(capsys.readouterr().out, "│")
    assert rich_rows == [["bm25", "0.800", "12.0"], ["hybrid", "0.900", "30.0"]]  # the header row is drawn with ┃
    assert {a.path for a in MlflowClient().list_artifacts(parent)} == {"sweep.png", "sweep.csv"}


def known_pairs(won: int, lost: int) -> tuple[list[dict], list[dict]]:
    """answer/f1 per question: the candidate gets 1 where the baseline got 0 (`won`), and the reverse (`lost`).

    Both runs have the same retrieval/recall_at_10 everywhere.
    """
    outcomes = [(0.0, 1.0)] * won + [(1.0, 0.0)] * lost
    baseline = [line(f"q{i}", answer__f1=b, retrieval__recall_at_10=0.5) for i, (b, _) in enumerate(outcomes)]
    candidate = [line(f"q{i}", answer__f1=c, retrieval__recall_at_10=0.5) for i, (_, c) in enumerate(outcomes)]
    return baseline, candidate


def test_paired_comparison_reports_the_exact_difference_ci_and_p_value(tmp_path, capsys, mlflow_store):
    uri, client, experiment = mlflow_store
    baseline_records, candidate_records = known_pairs(won=8, lost=2)
    baseline = logged_run(client, experiment, "baseline", baseline_records, tmp_path)
    candidate = logged_run(client, experiment, "candidate", candidate_records, tmp_path)
    for run_id, pipeline in ((baseline, "bm25"), (candidate, "hybrid")):
        client.set_tag(run_id, "ragtune.overrides", f"pipeline={pipeline}")
    compare.main([baseline, candidate, "--tracking-uri", uri, "--out", str(tmp_path / "out" / "chart.png")])
    printed = capsys.readouterr().out
    assert "hybrid vs baseline bm25" in printed
    stem = f"paired_{candidate[:8]}_vs_{baseline[:8]}"
    frame = pd.read_csv(tmp_path / "out" / f"{stem}.csv", index_col="metric")
    f1 = frame.loc["answer/f1"]
    assert (f1["baseline"], f1["candidate"], f1["n"]) == (pytest.approx(0.2), pytest.approx(0.8), 10)
    assert f1["diff"] == pytest.approx(0.6)
    # All 2**10 sign flips are enumerated: |sum| >= 6 for 0-2 or 8-10 wins, 2 * (1 + 10 + 45) of 1024.
    assert f1["p_value"] == pytest.approx(112 / 1024)
    assert -1.0 <= f1["ci_low"] < 0.6 < f1["ci_high"] <= 1.0
    recall = frame.loc["retrieval/recall_at_10"]
    assert (recall["diff"], recall["ci_low"], recall["ci_high"], recall["p_value"]) == (0.0, 0.0, 0.0, 1.0)
    row = next(cells for cells in table_rows(printed, "│") if cells[0] == "answer/f1")
    assert row[1:4] == ["0.200", "0.800", "+0.600"] and row[5:] == ["0.109", "10"]
    assert row[4] == f"[{f1['ci_low']:+.3f}, {f1['ci_high']:+.3f}]"
    logged = {a.path for a in client.list_artifacts(candidate, "compare")}
    assert logged == {f"compare/{stem}.csv", f"compare/{stem}.png"}


@pytest.mark.parametrize(("baseline", "expected"), [(None, 0), ("pipeline=b", 1)])
def test_a_sweep_id_alone_compares_each_child_with_its_baseline(tmp_path, baseline, expected, mlflow_store):
    uri, client, experiment = mlflow_store
    parent = client.create_run(experiment, run_name="sweep").info.run_id
    ids = {}
    for num in (1, 0):  # job 1 finishes first; override order still makes job 0 the default baseline
        name = "ab"[num]
        ids[num] = logged_run(client, experiment, name, questions(10, f1=0.5 + num / 10, recall=0.8), tmp_path, parent)
        for key, value in job_tags(num, [f"pipeline={name}"]).items():
            client.set_tag(ids[num], key, value)
    compare.main([parent, "--tracking-uri", uri, "--out", str(tmp_path / "sweep.png"),
                  *(["--baseline", baseline] if baseline else [])])
    base, other = ids[expected], ids[1 - expected]
    logged = {a.path for a in client.list_artifacts(parent, "compare")}
    assert logged == {f"compare/paired_{other[:8]}_vs_{base[:8]}.csv", f"compare/paired_{other[:8]}_vs_{base[:8]}.png"}
    assert mlflow.get_run(parent).data.tags["ragtune.baseline"] == "ab"[expected]


@pytest.mark.parametrize("runs", [3, 30])
def test_the_chart_stays_readable_for_a_study_of_many_runs(tmp_path, runs):
    """Bars up to MAX_BAR_RUNS runs; beyond, one row per run, so the width no longer grows with the runs."""
    import matplotlib.image

    frame = pd.DataFrame({"retrieval/mrr_at_10": [i / runs for i in range(runs)],
                          "latency/p95_ms": [100.0 + i for i in range(runs)]},
                         index=pd.Index([f"trial {i} top_k={i}" for i in range(runs)], name="run"))
    height, width, _ = matplotlib.image.imread(compare.plot_frame(frame, tmp_path / "chart.png")).shape
    if runs <= compare.MAX_BAR_RUNS:
        assert width > height  # bars side by side
    else:
        assert height > 0.26 * runs * 110 and width < 1000  # a row per run, two metric columns
