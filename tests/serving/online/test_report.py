"""`ragtune online-report` (issue 38, section 4): traces and ratings written through the real Traces and Ratings
paths into a real MLflow sqlite store, read back by the real CLI."""

import json

import mlflow
import pytest
from haystack import tracing

from serving.cli import main as cli
from serving.online.feedback import FeedbackRequest, Ratings
from serving.online.report import REPORT_EXPERIMENT
from serving.online.traces import Traces, quality_tags
from serving.online.variants import Variant
from serving.principals import Principal
from serving.settings import TraceSettings

ACME, BETA = Principal("acme", ("hr",)), Principal("beta")
REPLY = {"answer": "The Oslo limit is 1800 NOK [1]. It is cheap [2].", "refused": False,
         "citations": [{"marker": 1, "chunk_id": "c1"}, {"marker": 2, "chunk_id": "c2"}],
         "unsupported_sentences": ["It is cheap."], "documents": [{"chunk_id": "c1", "score": 0.9},
                                                                   {"chunk_id": "c2", "score": 0.4}]}


@pytest.fixture
def store(mlflow_store, tmp_path, monkeypatch):
    """The test's store with the served model's experiment and the report's, both keeping artifacts in tmp_path:
    (its URI, write(variant, ratings, request_ids=None))."""
    uri, client, _ = mlflow_store
    monkeypatch.setattr(tracing.tracer, "is_content_tracing_enabled", tracing.tracer.is_content_tracing_enabled)
    served = client.create_experiment("ragtune-serve/rag", artifact_location=(tmp_path / "traces").as_uri())
    client.create_experiment(REPORT_EXPERIMENT, artifact_location=(tmp_path / "reports").as_uri())

    def write(variant: str, ratings: list[int | None], request_ids: list[str] | None = None,
              refusing: bool = False) -> None:
        traces = Traces(TraceSettings(sample=0.0), served)
        feedback = Ratings(traces)
        for i, rating in enumerate(ratings):
            principal = ACME if i % 2 else BETA
            record = traces.start("What is the hotel limit in Oslo?", principal,
                                  request_ids[i] if request_ids else f"{variant}-{i}", Variant(variant, "", "3"))
            record.finish(200, REPLY | {"refused": refusing or i == 0})
            if rating is not None:
                assert feedback.accept(FeedbackRequest(trace_id=record.trace_id, rating=rating), principal)
        traces.drain()
        assert traces.counts()["dropped"] == 0

    return uri, write


def report(uri: str, tmp_path, *args: str) -> int:
    return cli(["online-report", "rag", "--tracking-uri", uri, "--out", str(tmp_path / "out"), *args])


def test_quality_tags_score_the_reply_as_evaluation_does():
    assert quality_tags(REPLY) == {"ragtune.citation_accuracy": "0.5000",
                                   "ragtune.unsupported_sentence_rate": "0.5000", "ragtune.top_score": "0.9000"}


def test_a_clearly_worse_challenger_exits_1_with_the_figures_as_json(store, tmp_path, capsys):
    uri, write = store
    write("champion", [1] * 12)
    write("challenger", [-1] * 12)
    assert report(uri, tmp_path, "--json") == 1
    out = json.loads(capsys.readouterr().out)
    assert out["champion"] == "champion" and out["champion_rule"] == "the variant named 'champion'"
    champion, challenger = out["variants"]["champion"], out["variants"]["challenger"]
    assert champion["requests"] == challenger["requests"] == 12
    assert champion["satisfaction"]["rate"] == 1.0 and 0.7 < champion["satisfaction"]["low"] < 1.0
    assert challenger["satisfaction"] == {"rate": 0.0, "low": 0.0, "high": pytest.approx(0.2425, abs=1e-3), "n": 12}
    assert champion["refusal_rate"] == pytest.approx(1 / 12)
    assert champion["latency_ms"]["p50"] >= 0 and champion["latency_ms"]["p95"] >= champion["latency_ms"]["p50"]
    assert champion["quality"] == {"citation_accuracy": 0.5, "unsupported_sentence_rate": 0.5, "top_score": 0.9}
    assert champion["tenants"]["acme"] == {"requests": 6, "rated": 6, "satisfaction": 1.0, "refusal_rate": 0.0}
    comparison = out["comparisons"]["challenger"]
    assert comparison["test"] == "two-proportion" and comparison["difference"] == -1.0
    assert comparison["ci"][1] < 0 and comparison["p_value"] < 0.001 and comparison["worse"]
    assert "What is the hotel" not in json.dumps(out)


def test_equal_variants_exit_0_and_write_the_markdown_plots_and_mlflow_run(store, tmp_path, capsys):
    uri, write = store
    write("champion", [1, -1] * 6)
    write("challenger", [-1, 1] * 6)
    assert report(uri, tmp_path) == 0
    printed = capsys.readouterr().out
    out = tmp_path / "out"
    assert f"report: {out / 'report.md'}" in printed
    markdown = (out / "report.md").read_text()
    assert "Champion: **champion** (the variant named 'champion')" in markdown
    assert "![satisfaction](satisfaction.png)" in markdown and "not significantly worse" in markdown
    for png in ("satisfaction.png", "latency.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and (out / png).stat().st_size > 10_000
    run_id = printed.rsplit("MLflow run: ", 1)[1].strip()
    run = mlflow.MlflowClient().get_run(run_id)
    assert run.data.metrics["champion/satisfaction"] == 0.5 and run.data.metrics["challenger/difference"] == 0.0
    artifacts = {a.path for a in mlflow.MlflowClient().list_artifacts(run_id)}
    assert {"report.md", "report.json", "satisfaction.png", "latency.png"} <= artifacts


def test_shadow_pairs_sharing_request_ids_are_compared_paired(store, tmp_path, capsys):
    uri, write = store
    shared = [f"req-{i}" for i in range(8)]
    write("production", [1] * 8, shared)
    write("shadow", [-1] * 8, shared)
    write("shadow", [1] * 12)  # unpaired: unpaired, the difference would be 1 - 12/20
    assert report(uri, tmp_path, "--json") == 0
    out = json.loads(capsys.readouterr().out)
    assert out["champion"] == "shadow" and out["champion_rule"] == "the variant with most requests"
    comparison = out["comparisons"]["production"]
    assert comparison["test"] == "paired" and comparison["n"] == 8 and comparison["difference"] == 1.0


def test_an_unrated_shadow_that_refuses_more_is_significantly_worse_over_its_pairs(store, tmp_path, capsys):
    uri, write = store
    shared = [f"req-{i}" for i in range(30)]
    write("champion", [1] * 30, shared)
    write("challenger", [None] * 30, shared, refusing=True)
    assert report(uri, tmp_path, "--json") == 1
    comparison = json.loads(capsys.readouterr().out)["comparisons"]["challenger"]
    assert comparison["difference"] is None  # a shadow is never rated
    refused = comparison["quality"]["refused"]
    assert refused["n"] == 30 and refused["difference"] > 0.9 and refused["p_value"] < 0.05
    assert comparison["worse"] is True
    assert "refused, paired over 30 shadow pairs" in (tmp_path / "out" / "report.md").read_text()


@pytest.mark.parametrize("args, first_line", [
    (["nobody"], "ragtune online-report: error: no traces of model 'nobody': experiment 'ragtune-serve/nobody'"),
    (["rag"], "ragtune online-report: error: no traces of model 'rag' in the last 7d"),
])
def test_an_unknown_model_or_an_empty_window_is_a_user_error_in_one_line(store, capsys, args, first_line):
    uri, _ = store
    assert cli(["online-report", *args, "--tracking-uri", uri]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[-1].startswith(first_line) and len([line for line in err if "error" in line]) == 1


def test_a_bad_window_is_refused_by_argparse(store):
    uri, _ = store
    with pytest.raises(SystemExit) as exited:
        cli(["online-report", "rag", "--since", "soon", "--tracking-uri", uri])
    assert exited.value.code == 2


def test_without_a_champion_variant_the_production_alias_is_the_champion(store, tmp_path, capsys):
    uri, write = store
    client = mlflow.MlflowClient()
    client.create_registered_model("rag")
    version = client.create_model_version("rag", (tmp_path / "model").as_uri()).version
    client.set_registered_model_alias("rag", "production", version)
    write("production", [None] * 2)
    write("canary", [None] * 4)
    assert report(uri, tmp_path, "--json") == 0
    out = json.loads(capsys.readouterr().out)
    assert out["champion"] == "production" and out["champion_rule"] == "the registered model's alias 'production'"
    assert list(out["variants"]) == ["production", "canary"]
    assert out["comparisons"]["canary"] == {"champion": "production", "challenger": "canary", "test": "two-proportion",
                                            "n": 0, "difference": None, "ci": [None, None], "p_value": None,
                                            "quality": {}, "worse": False}
