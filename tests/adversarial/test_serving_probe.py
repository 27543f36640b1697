"""Issue 42, section 7: serve.py's logs and its OpenAI route, probed on a real uvicorn server on loopback in front
of a real pipeline (BM25 over the demo corpus with the extractive answerer: offline, no model to load)."""

from __future__ import annotations

import json
import logging
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
import uvicorn

from experiments.runs.config import validate
from experiments.runs.indexed import prepare_pipeline
from serving.http.app import create_app
from serving.http.auth import bearer
from serving.http.state import ServerState
from serving.principals import Principal
from serving.served_pipeline import ServedPipeline
from serving.settings import ServeSettings
from tests.support.shipped import composed

KEYS = {"k-acme": Principal("acme", ("hr",)), "k-beta": Principal("beta")}
ACME, BETA = {"Authorization": "Bearer k-acme"}, {"Authorization": "Bearer k-beta"}
QUESTION = "How many days of paid annual leave do full-time employees accrue?"
MESSAGES = [{"role": "user", "content": QUESTION}]
WAIT_S = 60  # a guard against a hung server, never a pace: every wait ends on an event


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> ServedPipeline:
    """BM25 and the extractive answerer over the demo corpus: the cheap offline pipeline, indexed once."""
    cache = tmp_path_factory.mktemp("cache")
    cfg = composed("pipeline=bm25", "answer=extractive", "+pipeline.answer=${answer.stage}", f"paths.cache={cache}")
    return ServedPipeline.warm(prepare_pipeline(validate(cfg)))


class LogLines(logging.Handler):
    """The JSON lines serve.py logs, parsed; `wait` blocks until one matches."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[dict[str, Any]] = []
        self.arrived = threading.Condition()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = json.loads(record.getMessage())
        except json.JSONDecodeError:  # a traceback's line
            return
        with self.arrived:
            self.lines.append(line)
            self.arrived.notify_all()

    def wait(self, matches: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        with self.arrived:
            assert self.arrived.wait_for(lambda: any(map(matches, self.lines)), timeout=WAIT_S), self.lines
            return next(line for line in self.lines if matches(line))


@pytest.fixture
def log_lines() -> Iterator[LogLines]:
    logger, handler = logging.getLogger("ragtune.serve"), LogLines()
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(level)


class HeldLock:
    """Stands in for the served pipeline's lock, held by the test until `release`: `waiting` is set once a
    question waits for it, that is, once a request is inside the pipeline's thread."""

    def __init__(self) -> None:
        self.lock, self.waiting = threading.Lock(), threading.Event()
        self.lock.acquire()

    def __enter__(self) -> HeldLock:
        self.waiting.set()
        self.lock.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.lock.release()

    def release(self) -> None:
        if self.lock.locked():
            self.lock.release()


@pytest.fixture
def held(served: ServedPipeline, monkeypatch: pytest.MonkeyPatch) -> Iterator[HeldLock]:
    lock = HeldLock()
    monkeypatch.setattr(served, "lock", lock)
    yield lock
    lock.release()  # before the server stops: its shutdown waits for the pipeline's thread


@contextmanager
def live(served: ServedPipeline, **limits: Any) -> Iterator[str]:
    """serve.py's app on a real uvicorn server on loopback: its base URL. The socket listens before uvicorn
    starts, so a request sent at once waits in its backlog instead of failing."""
    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))
    listening.listen()
    app = create_app(ServerState(served, "models:/probe@production"), bearer(KEYS.get), ServeSettings(**limits))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listening]}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listening.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=WAIT_S)
        listening.close()


def test_a_busy_refusal_is_logged_with_its_request_id(served, held, log_lines):
    with live(served, max_pending=1) as url, httpx.Client(base_url=url, timeout=WAIT_S) as api:
        first: list[httpx.Response] = []
        running = threading.Thread(target=lambda: first.append(api.post("/query", json={"question": QUESTION},
                                                                         headers=ACME)))
        running.start()
        try:
            assert held.waiting.wait(timeout=WAIT_S)
            busy = api.post("/query", json={"question": QUESTION}, headers=ACME)
        finally:
            held.release()
            running.join()
    assert busy.status_code == 503 and busy.json()["error"] == "busy: 1 requests already pending"
    line = log_lines.wait(lambda line: line["status"] == 503)
    assert line == {"request_id": busy.json()["request_id"], "tenant": "acme", "status": 503,
                    "refused": "busy: 1 requests already pending", "path": "/query"}
    assert first[0].status_code == 200 and "20 days" in first[0].json()["answer"]


@pytest.mark.parametrize("path", ["/query", "/v1/chat/completions"])
@pytest.mark.parametrize("body", [b'{"question": "\xff"}', b"[" * 100_000 + b"]" * 100_000],
                         ids=["invalid-utf8", "nested-too-deep"])
def test_a_body_that_does_not_parse_is_a_400_with_a_request_id_and_a_log_line(served, log_lines, path, body):
    with live(served) as url:
        reply = httpx.post(url + path, content=body, headers=ACME | {"Content-Type": "application/json"},
                           timeout=WAIT_S)
    assert reply.status_code == 400
    assert reply.json() == {"error": "There was an error parsing the body", "request_id": reply.json()["request_id"]}
    line = log_lines.wait(lambda line: line.get("request_id") == reply.json()["request_id"])
    assert line["status"] == 400 and line["refused"] == "There was an error parsing the body" and line["path"] == path


def test_an_unknown_path_or_method_is_refused_like_any_other_request(served, log_lines):
    with live(served) as url, httpx.Client(base_url=url, timeout=WAIT_S) as api:
        missing, wrong_method = api.get("/v2/chat", headers=ACME), api.get("/query", headers=ACME)
    assert missing.status_code == 404 and missing.json()["error"] == "Not Found"
    assert wrong_method.status_code == 405 and wrong_method.headers["allow"] == "POST"
    for reply in (missing, wrong_method):
        assert log_lines.wait(lambda line, r=reply: line.get("request_id") == r.json()["request_id"])["status"] \
            == reply.status_code


@pytest.mark.parametrize(("path", "request_body"), [
    ("/query", {"question": QUESTION}),
    ("/query", {"question": QUESTION, "stream": True}),
    ("/v1/chat/completions", {"messages": MESSAGES}),
], ids=["query", "query-stream", "chat"])
def test_a_request_whose_client_hung_up_is_logged_as_499_not_200(served, held, log_lines, path, request_body):
    """The client closes its socket while the pipeline holds its question: the server logs 499 as soon as it
    sees the hang-up, and nothing more once the answer is ready."""
    body = json.dumps(request_body).encode()
    with live(served) as url:
        port = int(url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=WAIT_S) as client:
            client.sendall(b"POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer k-acme\r\n"
                           b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                           % (path.encode(), len(body), body))
            assert held.waiting.wait(timeout=WAIT_S)
        line = log_lines.wait(lambda line: "trace_id" in line)
        held.release()
    assert line["status"] == 499 and line["tenant"] == "acme" and "trace_id" in line
    assert line["refused"] == "the client closed the connection before the reply"
    assert [entry["status"] for entry in log_lines.lines] == [499]


@pytest.mark.parametrize(("extra", "message"), [
    ({"n": 0}, "invalid request: n: Value error, one choice is served, n must be 1, got 0"),
    ({"n": 3}, "invalid request: n: Value error, one choice is served, n must be 1, got 3"),
    ({"tools": [{"type": "function", "function": {"name": "kb_search", "parameters": {}}}]},
     "invalid request: tools: Value error, tool calls are not served; send no tools"),
    ({"tool_choice": "auto"}, 'invalid request: tool_choice: Value error, tool calls are not served; send no '
                              'tool_choice, or "none"'),
    ({"tool_choice": {"type": "function", "function": {"name": "kb_search"}}},
     'invalid request: tool_choice: Value error, tool calls are not served; send no tool_choice, or "none"'),
    ({"response_format": {"type": "json_object"}}, 'invalid request: response_format: Value error, the reply is '
                                                  'plain text; send no response_format, or {"type": "text"}'),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {}}}},
     'invalid request: response_format: Value error, the reply is plain text; send no response_format, or '
     '{"type": "text"}'),
])
def test_chat_options_that_would_change_the_reply_are_a_400_naming_the_field(served, log_lines, extra, message):
    """Refused before the pipeline runs: the same message whoever asks, whatever documents they may see."""
    with live(served) as url, httpx.Client(base_url=url, timeout=WAIT_S) as api:
        replies = [api.post("/v1/chat/completions", json={"messages": MESSAGES} | extra, headers=key)
                   for key in (ACME, BETA)]
    for reply in replies:
        assert reply.status_code == 400 and reply.json() == {"error": message, "request_id": reply.json()["request_id"]}
        line = log_lines.wait(lambda line, r=reply: line.get("request_id") == r.json()["request_id"])
        assert line["status"] == 400 and line["refused"] == message
    assert not any("trace_id" in line for line in log_lines.lines)  # no question reached the pipeline


@pytest.mark.parametrize("extra", [{}, {"n": 1}, {"tools": []}, {"tool_choice": "none"},
                                   {"response_format": {"type": "text"}}])
def test_chat_options_the_server_honours_are_answered(served, extra):
    with live(served) as url:
        reply = httpx.post(url + "/v1/chat/completions", json={"messages": MESSAGES} | extra, headers=ACME,
                           timeout=WAIT_S)
    assert reply.status_code == 200, reply.text
    assert len(reply.json()["choices"]) == 1 and "20 days" in reply.json()["choices"][0]["message"]["content"]
