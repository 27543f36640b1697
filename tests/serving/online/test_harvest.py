"""`ragtune harvest` (issue 38, section 5): traced requests and ratings made through the real serving app over the
demo corpus (BM25 and the extractive answerer) into a real MLflow sqlite store, harvested by the real CLI, and the
candidates loaded by the real demo loader."""

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from haystack import tracing

from experiments.datasets.demo import load_demo
from experiments.datasets.settings import DemoDataset
from serving.cli import main as cli
from serving.http.app import create_app
from serving.http.auth import bearer
from serving.http.state import ServerState
from serving.online.harvest import bigrams, question_key, similar
from serving.online.traces import Traces
from serving.principals import Principal
from serving.settings import ServeSettings, TraceSettings
from tests.support.run_py import job_dir, run

KEYS = {"k-acme": Principal("acme", ("hr",)), "k-beta": Principal("beta")}
ACME, BETA = {"Authorization": "Bearer k-acme"}, {"Authorization": "Bearer k-beta"}
LEAVE_ZH_EN = "年假有多少天？How many days of annual leave?"
LEAVE_NEAR = "年假有几天 how many days of annual leave"
LEAVE_SAME = "年假有多少天 ?  how MANY days of annual leave"
REFUSED = "Who won the 1998 football world cup?"
LIKED = "What is the nightly hotel limit?"
WEEK_OFF = "How far ahead must I request more than three days of leave?"
CORRECT = "Full-time employees accrue 20 days of paid annual leave per calendar year."


class Doubting:
    """The real pipeline, whose every answer sentence a verifier would call unsupported: the one reply field the
    extractive answerer never sets (its sentences are copied from the passages)."""

    def __init__(self, pipeline) -> None:
        self.pipeline = pipeline

    def ask(self, *args, **kwargs):
        reply = self.pipeline.ask(*args, **kwargs)
        return reply | {"unsupported_sentences": [reply["answer"].split(" [")[0]]}


@pytest.fixture
def served(mlflow_store, tmp_path, monkeypatch, bm25):
    """(the store's URI, serve(content, answerer=None, variant_uri) -> (client, traces)) for model `rag`."""
    uri, client, _ = mlflow_store
    monkeypatch.setattr(tracing.tracer, "is_content_tracing_enabled", tracing.tracer.is_content_tracing_enabled)
    client.create_experiment("ragtune-serve/rag", artifact_location=(tmp_path / "traces").as_uri())

    def serve(content: str = "full", answerer=None, model: str = "models:/rag/3") -> tuple[TestClient, Traces]:
        traces = Traces.for_model(TraceSettings(content=content, sample=0.0), model, None)
        state = ServerState(answerer or bm25, model, traces)
        return TestClient(create_app(state, bearer(KEYS.get), ServeSettings())), traces

    return uri, serve


def ask(api: TestClient, question: str, headers: dict, **rating) -> str:
    reply = api.post("/query", json={"question": question}, headers=headers)
    assert reply.status_code == 200, reply.text
    trace_id = reply.json()["trace_id"]
    if rating:
        assert api.post("/feedback", json={"trace_id": trace_id, **rating}, headers=headers).status_code == 202
    return trace_id


def harvest(uri: str, out: Path, *args: str) -> int:
    return cli(["harvest", "rag", "--out", str(out), "--tracking-uri", uri, *args])


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture
def harvested(served, bm25, tmp_path, capsys):
    """Candidates harvested from down-rated (a Chinese and English question asked three ways), refused and
    unsupported answers, beside a liked one: (the file, the printed summary, the traces' ids by name)."""
    uri, serve = served
    api, traces = serve()
    ids = {
        "zh_en": ask(api, LEAVE_ZH_EN, ACME, rating=-1, correct_answer=CORRECT),
        "near": ask(api, LEAVE_NEAR, BETA, rating=-1),
        "same": ask(api, LEAVE_SAME, BETA, rating=2, scale=5),
        "refused": ask(api, REFUSED, ACME),
        "liked": ask(api, LIKED, ACME, rating=1),
    }
    traces.drain()
    api, traces = serve(answerer=Doubting(bm25), model="models:/rag@challenger")
    ids["unsupported"] = ask(api, WEEK_OFF, BETA)
    traces.drain()
    out = tmp_path / "candidates.jsonl"
    assert harvest(uri, out) == 0
    return out, capsys.readouterr().out, ids


def test_failures_become_strict_golden_candidates_with_provenance(harvested):
    out, printed, ids = harvested
    assert printed.splitlines() == [
        f"harvest: read 6 traces of rag (last 7d); 3 candidates (down_rated 1, refused 1, unsupported 1); merged 2 "
        f"duplicates; wrote {out}"]
    leave, refused, week_off = lines(out)
    assert leave["question"] == LEAVE_ZH_EN and leave["id"].startswith("harvest-") and leave["status"] == "candidate"
    assert leave["reference_answer"] == CORRECT
    assert leave["evidence"][0] == CORRECT  # the cited sentence that best overlaps the correct answer
    assert leave["x_reasons"] == ["down_rated"] and leave["x_count"] == 3 and leave["x_variants"] == ["champion"]
    assert set(leave["x_trace_ids"]) == {ids["zh_en"], ids["near"], ids["same"]}
    assert len(leave["x_answer_given"]) == 2  # the Chinese passage's answer, and the English one
    assert refused["question"] == REFUSED and refused["answerable"] is False and refused["x_reasons"] == ["refused"]
    assert "evidence" not in refused and "reference_answer" not in refused
    assert refused["x_answer_given"] == ["I cannot answer this from the provided documents."]
    assert week_off["x_reasons"] == ["unsupported"] and week_off["x_variants"] == ["challenger"]
    # the cited snippet's sentence closest to the answer (the answer's own sentence is cut off in the snippet)
    assert week_off["evidence"] == ["Requests for one or two days should be submitted at least 3 working days in "
                                    "advance."]
    assert ids["liked"] not in out.read_text()


def test_the_candidates_load_only_when_included_and_their_quotes_are_found_in_the_corpus(harvested, caplog):
    out, _, _ = harvested
    caplog.set_level("INFO", logger="experiments.datasets.golden.evidence")
    reviewed_only = load_demo(DemoDataset(golden=["golden.jsonl", str(out)]))
    assert not [item for item in reviewed_only.golden if item.id.startswith("harvest-")]
    assert [r.getMessage() for r in caplog.records if "candidate" in r.getMessage()] == [
        f'golden set {out}: skipped 3 candidate item(s) ("status": "candidate", not reviewed yet); '
        "dataset.include_candidates=true loads them"]
    included = load_demo(DemoDataset(golden=["golden.jsonl", str(out)], include_candidates=True))
    candidates = [item for item in included.golden if item.candidate]
    assert len(candidates) == 3 and len(included.golden) == len(reviewed_only.golden) + 3
    assert all(spans for item in candidates for spans in item.evidence_spans)
    assert included.golden_fingerprint != reviewed_only.golden_fingerprint


def test_harvest_ids_are_stable_and_an_existing_out_needs_force(harvested, served, capsys):
    out, _, _ = harvested
    uri, _ = served
    first = out.read_bytes()
    assert harvest(uri, out) == 2
    assert capsys.readouterr().err.strip() == f"ragtune harvest: error: {out} exists; pass --force to overwrite it"
    assert harvest(uri, out, "--force") == 0 and out.read_bytes() == first


def test_redacted_traces_are_counted_and_listed_but_never_written(served, tmp_path, capsys):
    uri, serve = served
    api, traces = serve(content="redacted")
    down = ask(api, LEAVE_ZH_EN, ACME, rating=-1, correct_answer=CORRECT)
    refused = ask(api, REFUSED, BETA)
    traces.drain()
    out = tmp_path / "candidates.jsonl"
    assert harvest(uri, out) == 0
    printed = capsys.readouterr()
    assert printed.out.splitlines() == [
        "harvest: read 2 traces of rag (last 7d); 0 candidates (down_rated 0, refused 0, unsupported 0); merged 0 "
        "duplicates; nothing written",
        f"unreadable: 2 failing traces (down_rated 1, refused 1, unsupported 0): {down} {refused}"]
    why = [line for line in printed.err.splitlines() if line.startswith("ragtune harvest:")]
    assert len(why) == 1 and why[0].startswith("ragtune harvest: 2 failing traces kept no question text (served "
                                               "with serve.trace.content=redacted or none)")
    assert not out.exists()


@pytest.mark.parametrize("a, b, same", [
    (LEAVE_ZH_EN, LEAVE_NEAR, True),
    ("What is the hotel limit in Oslo?", "what's the hotel limit in oslo", True),
    ("What is the hotel limit in Oslo?", "What is the hotel limit in Bergen?", False),
    ("年假有多少天", "病假有多少天", False),
])
def test_near_duplicates_are_told_by_character_bigrams_in_any_script(a, b, same):
    assert similar(bigrams(question_key(a)), bigrams(question_key(b))) is same


def test_question_keys_ignore_case_width_whitespace_and_punctuation():
    assert question_key("ＡＢＣ，  年假？ What's up!") == question_key("abc 年假 what s up") == "abc 年假 what s up"


# --- appending a reviewed file -----------------------------------------------------------------------------------

GOLDEN = ('{"id": "g1", "question": "How many days of leave?", "reference_answer": "20"}\r\n'
          '{"id": "g2", "question": "年假有多少天？", "reference_answer": "10天"}')  # CRLF, no final newline


def reviewed(tmp_path: Path, *records: dict) -> Path:
    path = tmp_path / "reviewed.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


@pytest.fixture
def golden(tmp_path) -> Path:
    path = tmp_path / "golden.jsonl"
    path.write_bytes(GOLDEN.encode())
    return path


def append(reviewed_file: Path, golden_file: Path) -> int:
    return cli(["harvest", "--append", str(reviewed_file), "--to", str(golden_file)])


def test_a_reviewed_file_is_appended_keeping_the_golden_lines_byte_for_byte(tmp_path, golden, capsys):
    new = {"id": "harvest-1", "question": "Who approves a week off?", "reference_answer": "your manager",
           "status": "reviewed", "x_count": 2}
    assert append(reviewed(tmp_path, new, {"id": "h2", "question": "Where?", "answerable": False}), golden) == 0
    data = golden.read_bytes()
    assert data.startswith(GOLDEN.encode() + b"\r\n") and data.endswith(b"\r\n")
    assert [json.loads(line) for line in data.decode().splitlines()[2:]] == [
        new, {"id": "h2", "question": "Where?", "answerable": False}]
    assert capsys.readouterr().out.strip() == (f"harvest: appended 2 reviewed items from {tmp_path / 'reviewed.jsonl'}"
                                               f" to {golden} (4 items now)")
    assert not list(tmp_path.glob(".golden.jsonl.*"))


@pytest.mark.parametrize("record, problem", [
    ({"id": "h1", "question": "Who approves?", "reference_answer": "a manager", "status": "candidate"},
     'reviewed.jsonl:1 (id=h1): still "status": "candidate"; review it, then mark it "reviewed"'),
    ({"id": "g2", "question": "Who approves?", "reference_answer": "a manager"},
     "reviewed.jsonl:1 (id=g2): id already in {golden}:2"),
    ({"id": "h1", "question": "年假有多少天", "reference_answer": "10天"},
     "reviewed.jsonl:1 (id=h1): question already in {golden}:2"),
    ({"id": "h1", "question": "Who approves?", "answer": "a manager"},
     "reviewed.jsonl:1 (id=h1): unknown key 'answer'; did you mean 'reference_answer'?"),
])
def test_an_unreviewed_duplicate_or_malformed_item_is_refused_in_one_line(tmp_path, golden, capsys, record,
                                                                          problem):
    assert append(reviewed(tmp_path, record), golden) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [f"ragtune harvest: error: {tmp_path}/" + problem.format(golden=golden)]
    assert golden.read_bytes() == GOLDEN.encode()


def test_append_needs_both_files_and_no_model(tmp_path, golden):
    with pytest.raises(SystemExit) as exited:
        cli(["harvest", "rag", "--append", str(golden)])
    assert exited.value.code == 2


@pytest.mark.slow
def test_run_py_loads_the_harvested_candidates_beside_the_demo_golden_set(harvested, tmp_path):
    out, _, _ = harvested
    run(tmp_path, "pipeline=bm25", f"dataset.golden=[golden.jsonl,{out}]", "dataset.include_candidates=true",
        f"hydra.run.dir={job_dir(tmp_path, 'candidates')}")
    asked = [json.loads(line)["id"] for line in (job_dir(tmp_path, "candidates") / "per_question.jsonl").open()]
    assert len([i for i in asked if i.startswith("harvest-")]) == 3
