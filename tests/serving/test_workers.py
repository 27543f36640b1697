"""serve.workers (issue 41, section 2): N processes on one port, one readiness and one /metrics for them all.

The shared folder and the published counts in process; the supervisor with a tiny app (real processes, real
sockets); and, slow, `serve.py serve.workers=2` on the promoted tenant-split demo."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry, generate_latest, values
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.parser import text_string_to_metric_families

from experiments.datasets.demo import DEMO_DIR
from experiments.runs.config import compose
from pipelines.errors import ConfigError, UserError
from serving.audit.checks import may_see
from serving.audit.run import promoted
from serving.http.app import create_app
from serving.http.auth import bearer
from serving.http.state import ServerState
from serving.http.worker_folder import PLAN_ENV, PlannedVariant, WorkerFolder, WorkerPlan
from serving.loopback import free_port, wait_until_up
from serving.online.metrics import CACHE_COUNTS, MULTIPROC_ENV, PublishedCounts
from serving.online.variants import Variant
from serving.principals import Principal, read_api_keys
from serving.serve_worker import variant_of
from serving.settings import ServeSettings, compose_serve, serve_settings
from tests.support.snapshots import dead_pid

ROOT = Path(__file__).resolve().parents[2]
KEYS = {"k-acme": Principal("acme"), "k-ops": Principal("ops", admin=True)}


def test_serve_workers_is_one_unless_set_and_at_least_one():
    assert serve_settings(compose_serve([])).workers == 1
    assert serve_settings(compose_serve(["serve.workers=3"])).workers == 3
    with pytest.raises(ConfigError, match="serve.workers"):
        serve_settings(compose_serve(["serve.workers=0"]))


def test_the_plan_reaches_a_worker_through_its_environment(tmp_path, monkeypatch):
    champion = PlannedVariant("champion", "models:/rag@champion", "3", 0.9, str(tmp_path / "a"))
    shadow = PlannedVariant("shadow", "models:/rag@shadow", "4", 1.0, str(tmp_path / "b"))
    plan = WorkerPlan(
        ["serve.workers=2"], "models:/rag", "sqlite:///x.db", str(tmp_path), 2, "127.0.0.1", 8080, [champion], shadow
    )
    monkeypatch.setenv(PLAN_ENV, plan.to_env())
    read = WorkerPlan.from_env()
    assert read == plan and read.shared == WorkerFolder(tmp_path, 2)
    assert read.bundles == {"models:/rag@champion": tmp_path / "a", "models:/rag@shadow": tmp_path / "b"}
    assert variant_of(read.variants[0]) == Variant("champion", "models:/rag@champion", "3", 0.9)


def test_every_worker_must_have_loaded_and_the_last_to_load_says_so_once(tmp_path):
    folder = WorkerFolder(tmp_path, 2)
    (tmp_path / f"ready-{dead_pid()}").touch()  # a worker that died after it loaded: it counts no more
    assert not folder.mark_ready() and not folder.all_ready()
    (tmp_path / f"ready-{os.getppid()}").touch()  # the other worker loads
    assert folder.all_ready()
    assert folder.mark_ready()  # this worker's mark completes the set: it says the server is ready
    assert not folder.mark_ready()  # once (a worker restarted later finds it said)


def test_the_first_failure_is_kept_with_whether_the_user_can_fix_it(tmp_path, capsys):
    folder = WorkerFolder(tmp_path, 2)
    assert folder.failure() is None
    folder.fail(ConfigError("config key 'x': wrong\nmore"))
    folder.fail(RuntimeError("a bug"))
    failure = folder.failure()
    assert (failure.pid, failure.message, failure.user) == (os.getpid(), "config key 'x': wrong", True)
    assert "RuntimeError: a bug" in capsys.readouterr().err  # a bug's traceback goes to stderr


@pytest.fixture
def multiprocess(tmp_path, monkeypatch):
    """prometheus-client in multiprocess mode, as in a worker: a process identity `as_pid` sets, and the folder."""
    folder = tmp_path / "metrics"
    folder.mkdir()
    monkeypatch.setenv(MULTIPROC_ENV, str(folder))
    identity = [os.getpid()]
    monkeypatch.setattr(values, "ValueClass", values.MultiProcessValue(lambda: identity[0]))
    return folder, identity


def scraped(folder: Path) -> dict[str, float]:
    registry = CollectorRegistry()
    MultiProcessCollector(registry, str(folder))
    text = generate_latest(registry).decode()
    return {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples}


def test_two_workers_published_counts_are_summed_by_a_scrape(multiprocess):
    """A counter grows by what its source counted since the last publication; a level is the worker's own."""
    folder, identity = multiprocess
    first = {"hits": 4, "misses": 1, "evictions": 0, "entries": 3, "bytes": 300}
    one = PublishedCounts(lambda: first, CACHE_COUNTS)
    one.publish()
    first.update(hits=6, entries=2)
    one.publish()  # 6 hits in all, not 10
    identity[0] = os.getppid()  # another (live) worker
    PublishedCounts(
        lambda: {"hits": 1, "misses": 2, "evictions": 1, "entries": 5, "bytes": 50}, CACHE_COUNTS
    ).publish()
    got = scraped(folder)
    assert (got["ragtune_cache_hits_total"], got["ragtune_cache_misses_total"]) == (7, 3)
    assert (got["ragtune_cache_entries"], got["ragtune_cache_bytes"]) == (7, 350)


def test_nothing_is_published_before_the_source_exists(multiprocess):
    folder, _ = multiprocess
    PublishedCounts(lambda: None, CACHE_COUNTS).publish()
    assert scraped(folder) == {}


class Answerer:
    def ask(
        self, question, history=None, filters=None, stages=False, on_token=None, on_step=None, tracer=None
    ):
        return {"answer": question, "refused": False, "citations": [], "documents": [], "stages_ms": {}}


def test_a_worker_is_ready_with_the_others_and_names_itself_in_its_log_lines(multiprocess, tmp_path, caplog):
    folder = WorkerFolder(tmp_path, 2)
    app = create_app(
        ServerState(Answerer(), "models:/rag@production"), bearer(KEYS.get), ServeSettings(workers=2), folder
    )
    api = TestClient(app, client=("127.0.0.1", 50000))
    folder.mark_ready()
    assert api.get("/readyz").status_code == 503  # loaded here, not in the other worker
    (tmp_path / f"ready-{os.getppid()}").touch()
    assert api.get("/readyz").status_code == 200
    with caplog.at_level("INFO", logger="ragtune.serve"):
        asked = api.post("/query", json={"question": "hi"}, headers={"Authorization": "Bearer k-acme"})
        assert asked.status_code == 200
        assert api.post("/query", json={"question": "hi"}).status_code == 401
    lines = [json.loads(record.getMessage()) for record in caplog.records if record.name == "ragtune.serve"]
    assert [line["worker"] for line in lines] == [os.getpid()] * 2
    text = api.get("/metrics").text
    assert 'ragtune_requests_total{status="200",variant="production"} 1.0' in text
    assert 'ragtune_refusals_total{path="/query",status="401"} 1.0' in text


def alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists() and "zombie" not in Path(f"/proc/{pid}/status").read_text()


def pids_answering(url: str, requests: int) -> set[int]:
    """The workers that answer `requests` GET /pid, each on a connection of its own."""
    return {httpx.get(f"{url}/pid", timeout=10).json()["pid"] for _ in range(requests)}


def test_the_supervisor_spreads_connections_replaces_a_dead_worker_and_stops_them_all(tmp_path):
    port, log = free_port(), tmp_path / "supervisor.log"
    with log.open("w") as out:
        supervisor = subprocess.Popen(
            [sys.executable, "-m", "tests.support.pid_app", str(port)],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(f"{url}/pid", supervisor, log)
        deadline, workers = time.monotonic() + 60, set()
        while len(workers) < 2 and time.monotonic() < deadline:  # the second may still be starting
            workers |= pids_answering(url, 20)
        assert len(workers) == 2, log.read_text()
        killed = min(workers)
        os.kill(killed, signal.SIGKILL)
        deadline, now = time.monotonic() + 60, set()
        while len(now - {killed}) < 2 and time.monotonic() < deadline:
            now |= pids_answering(url, 20)
        assert killed not in now and len(now) == 2, log.read_text()
    finally:
        supervisor.send_signal(signal.SIGTERM)
        supervisor.wait(timeout=60)
    assert "stopped by SIGTERM" in log.read_text()
    assert not any(alive(pid) for pid in now | workers)


def test_a_worker_that_cannot_start_stops_the_supervisor(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "tests.support.pid_app", str(free_port())],
        cwd=ROOT,
        env=os.environ | {"PID_APP_FAIL": "1"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "stopped by a worker that failed to start" in result.stdout, result.stderr


# --- serve.py serve.workers=2 on the promoted tenant-split demo (slow) ------------------------------------------

SERVE_PY = ROOT / "serve.py"
DEMO_KEYS = DEMO_DIR / "api_keys.yaml"
ASKING = ("demo-acme-staff", "demo-globex-staff")


@pytest.fixture(scope="module")
def promoted_demo(tmp_path_factory):
    """The shipped defaults on the demo split among its tenants, run and promoted as workers-demo@production."""
    folder = tmp_path_factory.mktemp("workers")
    cfg = compose([f"dataset.meta_file={DEMO_DIR / 'tenants.jsonl'}", "eval.trace_sample=0"])
    return folder, promoted(cfg, folder, "workers-demo")


def serve_py(folder: Path, uri: str, port: int, log: Path) -> subprocess.Popen:
    with log.open("w") as out:
        return subprocess.Popen(
            [
                sys.executable,
                str(SERVE_PY),
                "model=models:/workers-demo@production",
                f"mlflow.tracking_uri={uri}",
                "serve.workers=2",
                f"serve.api_keys_file={DEMO_KEYS}",
                f"serve.port={port}",
            ],
            cwd=folder,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def metas() -> dict[str, dict]:
    """Who may see each demo document (tenants.jsonl; a document it does not list is public)."""
    rows = [
        json.loads(line) for line in (DEMO_DIR / "tenants.jsonl").read_text().splitlines() if line.strip()
    ]
    return {row.pop("doc_id"): row for row in rows}


def questions() -> list[str]:
    rows = [json.loads(line) for line in (DEMO_DIR / "golden.jsonl").read_text().splitlines() if line.strip()]
    return [row["question"] for row in rows if row["id"].startswith("en-")][:8]


@pytest.mark.slow
def test_two_workers_answer_in_scope_count_as_one_and_stop_together(promoted_demo):
    folder, uri = promoted_demo
    port, log = free_port(), folder / "serve-2.log"
    url = f"http://127.0.0.1:{port}"
    server = serve_py(folder, uri, port, log)
    try:
        wait_until_up(f"{url}/readyz", server, log, seconds=600)
        loads = log.read_text().count("BM25sRetriever loaded its index")
        assert loads == 2, log.read_text()  # 200 only once both workers loaded
        assert log.read_text().count("is ready on") == 1 and "2 workers" in log.read_text()
        keys, visible = read_api_keys(DEMO_KEYS), metas()
        asked = [(key, question) for key in ASKING for question in questions()]

        def ask(item: tuple[str, str]) -> dict:  # a connection per request: the kernel spreads them
            reply = httpx.post(
                f"{url}/query",
                json={"question": item[1]},
                timeout=300,
                headers={"Authorization": f"Bearer {item[0]}"},
            )
            assert reply.status_code == 200, reply.text
            return reply.json()

        with ThreadPoolExecutor(max_workers=8) as pool:
            replies = list(pool.map(ask, asked))
        for (key, question), reply in zip(asked, replies, strict=True):
            shown = {ref["doc_id"] for ref in reply["documents"] + reply["citations"]}
            assert shown and all(may_see(keys[key], visible.get(doc, {})) for doc in shown), (
                key,
                question,
                shown,
            )
        assert {doc for r in replies[: len(asked) // 2] for doc in (d["doc_id"] for d in r["documents"])} != {
            doc for r in replies[len(asked) // 2 :] for doc in (d["doc_id"] for d in r["documents"])
        }
        lines = [json.loads(line) for line in log.read_text().splitlines() if line.startswith('{"trace_id"')]
        workers = {line["worker"] for line in lines}
        assert len(lines) == len(asked) and len(workers) == 2, workers
        exposition = httpx.get(f"{url}/metrics", timeout=30).text
        found = re.search(
            r'^ragtune_requests_total\{status="200",variant="production"\} (\S+)$', exposition, re.M
        )
        assert found and float(found.group(1)) == len(asked)
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=120)
    assert server.returncode == -signal.SIGTERM  # ends by the signal, as one process does
    assert not any(alive(pid) for pid in workers)


@pytest.mark.slow
def test_a_worker_that_cannot_load_stops_the_server_with_its_error(promoted_demo, tmp_path):
    folder, uri = promoted_demo
    manifest = next((folder / "artifacts").rglob("bundle/index/*/manifest.json"))
    saved = manifest.read_text()
    chunks = json.loads(saved)["chunks"]
    wrong = (
        chunks + 1 if len(str(chunks + 1)) == len(str(chunks)) else chunks - 1
    )  # the same size: read_bundle passes
    manifest.write_text(saved.replace(f'"chunks": {chunks}', f'"chunks": {wrong}'))
    server = serve_py(folder, uri, free_port(), tmp_path / "serve.log")
    try:
        server.wait(timeout=600)
    finally:
        server.kill()
        manifest.write_text(saved)
    output = (tmp_path / "serve.log").read_text()
    assert server.returncode == 2 and "Traceback" not in output, output
    error = [line for line in output.splitlines() if line.startswith("ragtune serve: error: worker ")]
    assert len(error) == 1 and "is damaged" in error[0] and f"the manifest records {wrong}" in error[0], (
        output
    )


def test_removing_the_shared_folder_deletes_only_what_the_server_wrote(tmp_path):
    folder = WorkerFolder.make(2, tmp_path)
    (folder.path / f"ready-{os.getpid()}").touch()
    (folder.metrics / "counter_1.db").write_bytes(b"x")
    (folder.metrics / "gauge_livesum_1.db").write_bytes(b"x")
    folder.mark_ready()
    folder.fail(UserError("bad bundle"))
    folder.remove()
    assert not folder.path.exists()

    # the server's folder, where a user's files turned up beside its own: those stay, and so does the folder
    mixed = WorkerFolder.make(2, tmp_path)
    (mixed.path / "ready-notes.txt").write_text("mine")
    (mixed.metrics / "sales.db").write_text("mine")
    (mixed.metrics / "counter_7.db").write_bytes(b"x")
    mixed.remove()
    assert sorted(p.name for p in mixed.path.rglob("*")) == ["metrics", "ready-notes.txt", "sales.db"]

    # a folder of a user's files that the server did not make (no marker), named as the server names its own
    users = WorkerFolder(tmp_path / "users", 2)
    users.metrics.mkdir(parents=True)
    for name in ("notes.txt", "ready-1", "announced", "failure.json"):
        (users.path / name).write_text("mine")
    (users.metrics / "counter_1.db").write_text("mine")
    users.remove()
    assert sorted(p.name for p in users.path.rglob("*")) == [
        "announced", "counter_1.db", "failure.json", "metrics", "notes.txt", "ready-1"]

    # a symlink to the server's own folder is not followed
    target = WorkerFolder.make(2, tmp_path)
    (target.path / "ready-2").touch()
    (tmp_path / "link").symlink_to(target.path)
    WorkerFolder(tmp_path / "link", 2).remove()
    assert (target.path / "ready-2").exists() and (tmp_path / "link").is_symlink()
    target.remove()
    assert not target.path.exists()


def test_the_fork_server_loads_jiebas_dictionary_so_its_workers_share_it():
    """Loaded in a worker, at its first Chinese text, the dictionary (some 60 MB) would be each worker's own."""
    probe = "import serving.fork_server, jieba, gc; print(jieba.dt.initialized, gc.get_freeze_count() > 0)"
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.stdout.split() == ["True", "True"], out.stderr[-2000:]
