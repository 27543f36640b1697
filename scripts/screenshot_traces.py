"""Regenerates the screenshots of the MLflow UI showing production traces with their users' feedback
(docs/images/mlflow-production-*.png, shown in docs/serving.md).

A maintainer's tool, run by hand when the UI or what a trace holds changes:

    python scripts/screenshot_traces.py      # exit 0 written; 1 the UI did not show them in time; 2 a tool missing

It needs headless Chromium (`apt-get install -y chromium`) and a CJK font for the Chinese questions
(`apt-get install -y fonts-noto-cjk`); neither is a project dependency. Nothing is faked: a temporary MLflow sqlite
store behind a loopback `mlflow server`, the demo's BM25 pipeline served in process by the real app with
serve.trace.content=full, golden questions in English and Chinese asked as two tenants over /query, and ratings
(up when the answer holds the reference answer, else down with a comment and the correct answer) over /feedback.
Chromium is driven over the DevTools protocol rather than its --screenshot flag, because a single-page app is
photographed only once its tables have loaded, and the trace's detail opens from its own URL.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack, suppress
from itertools import count
from pathlib import Path
from typing import Any

import httpx
from websockets.sync.client import ClientConnection, connect

from experiments.runs.config import validate
from pipelines.errors import UserError
from pipelines.run_layout import TRACE_TENANT_TAG

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = Path("/usr/bin/chromium")
MODEL_URI = "models:/handbook/1"  # version 1, served as the champion
# (golden item, the demo API key that asks it): two tenants, English and Chinese.
ASKED = [("en-001", "demo-acme-staff"), ("zh-001", "demo-globex-staff"), ("en-006", "demo-acme-staff"),
         ("zh-002", "demo-globex-staff"), ("en-011", "demo-globex-staff"), ("zh-004", "demo-acme-staff"),
         ("en-017", "demo-acme-staff"), ("zh-003", "demo-globex-staff")]
ASSISTANT_CLOSE = "mlflow.assistant.chat_panel.close"
# How long the UI may take to show what is photographed.
UI_SECONDS = 60.0


def check_tools() -> None:
    """The tools a screenshot needs, each missing one said in one line (exit 2)."""
    if not CHROMIUM.exists():
        raise UserError(f"{CHROMIUM} not found: install it with `apt-get install -y chromium`")
    fonts = subprocess.run(["fc-list", ":lang=zh"], capture_output=True, text=True, check=False).stdout
    if not fonts.strip():
        raise UserError("no CJK font: the Chinese questions would show as boxes; install one with "
                        "`apt-get install -y fonts-noto-cjk`")


def start(command: list[str], log: Path) -> subprocess.Popen:
    """`command` in a process group of its own, so that `stop` ends its children too (uvicorn, renderers)."""
    with log.open("w") as out:
        return subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def stop(process: subprocess.Popen) -> None:
    """Ends `process` and its group: SIGTERM, then SIGKILL for whatever is left (mlflow server's job consumers may
    outlive it) once it has gone or 10 s have passed."""
    os.killpg(process.pid, signal.SIGTERM)
    with suppress(subprocess.TimeoutExpired):
        process.wait(10)
    with suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def mlflow_server(folder: Path, port: int) -> subprocess.Popen:
    """`mlflow server` on loopback over a new sqlite store in `folder`, up and answering."""
    from serving.loopback import wait_until_up

    log = folder / "mlflow-server.log"
    server = start([sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port),
                    "--backend-store-uri", f"sqlite:///{folder / 'mlflow.db'}",
                    "--artifacts-destination", (folder / "artifacts").as_uri(), "--workers", "1"], log)
    wait_until_up(f"http://127.0.0.1:{port}/health", server, log)
    return server


def golden(ids: list[str]) -> dict[str, dict[str, Any]]:
    items = (json.loads(line) for line in (ROOT / "data/demo/golden.jsonl").read_text(encoding="utf-8").splitlines())
    return {item["id"]: item for item in items if item["id"] in ids}


def serve_and_rate(cache: Path) -> tuple[str, str]:
    """Asks and rates the questions through the real app: the id of the served model's experiment, and a trace to
    open (a down-rated one where there is one)."""
    from fastapi.testclient import TestClient

    from components.common.words import answer_tokens
    from experiments.runs.config import compose
    from experiments.runs.indexed import prepare_pipeline
    from serving.http.app import create_app
    from serving.http.auth import bearer
    from serving.http.state import ServerState
    from serving.online.traces import Traces
    from serving.principals import read_api_keys
    from serving.served_pipeline import ServedPipeline
    from serving.settings import ServeSettings, TraceSettings

    cfg = compose(["pipeline=bm25", "answer=extractive", "+pipeline.answer=${answer.stage}", f"paths.cache={cache}"])
    pipeline = ServedPipeline.warm(prepare_pipeline(validate(cfg)))
    traces = Traces.for_model(TraceSettings(content="full", sample=1.0), MODEL_URI, None)
    keys = read_api_keys(ROOT / "data/demo/api_keys.yaml")
    api = TestClient(create_app(ServerState(pipeline, MODEL_URI, traces), bearer(keys.get), ServeSettings()))
    items = golden([item for item, _ in ASKED])
    ratings = {}
    for item_id, key in ASKED:
        item, auth = items[item_id], {"Authorization": f"Bearer {key}"}
        reply = api.post("/query", json={"question": item["question"]}, headers=auth)
        reply.raise_for_status()
        answer = reply.json()["answer"] or ""
        right = set(answer_tokens(item["reference_answer"])) <= set(answer_tokens(answer))
        rating = {"rating": 1} if right else {
            "rating": -1, "comment": "The answer misses the figure asked for.",
            "correct_answer": item["reference_answer"]}
        trace_id = reply.json()["trace_id"]
        api.post("/feedback", json={"trace_id": trace_id, **rating}, headers=auth).raise_for_status()
        ratings[trace_id] = rating["rating"]
        print(f"{item_id} as {key}: {'up' if right else 'down'}")
    traces.drain()
    if traces.counts()["dropped"]:
        raise RuntimeError(f"traces dropped: {traces.counts()}")
    return traces.experiment_id, min(ratings, key=ratings.__getitem__)


class Browser:
    """One headless Chromium page, driven over the DevTools protocol."""

    def __init__(self, folder: Path, port: int, width: int, height: int) -> None:
        from serving.loopback import wait_until_up

        log = folder / "chromium.log"
        self.process = start([str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                              f"--remote-debugging-port={port}", f"--user-data-dir={folder / 'profile'}",
                              f"--window-size={width},{height}", "--force-device-scale-factor=1", "about:blank"], log)
        wait_until_up(f"http://127.0.0.1:{port}/json/version", self.process, log, seconds=30)
        page = next(t for t in httpx.get(f"http://127.0.0.1:{port}/json/list").json() if t["type"] == "page")
        self.opened = ExitStack()
        self.socket: ClientConnection = self.opened.enter_context(connect(page["webSocketDebuggerUrl"], max_size=None))
        self.ids = count(1)
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        sent = next(self.ids)
        self.socket.send(json.dumps({"id": sent, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv())
            if message.get("id") == sent:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"]

    def evaluate(self, expression: str) -> Any:
        return self.call("Runtime.evaluate", expression=expression, returnByValue=True)["result"].get("value")

    def wait(self, expression: str, what: str) -> None:
        deadline = time.monotonic() + UI_SECONDS
        while not self.evaluate(expression):
            if time.monotonic() > deadline:
                raise TimeoutError(f"the MLflow UI did not show {what} within {UI_SECONDS:.0f} s")
            time.sleep(0.5)

    def click(self, element: str) -> bool:
        """Clicks the element the JavaScript expression `element` finds, as a mouse would (the UI's menus open on
        pointer events, not on element.click()); False when there is none."""
        box = self.evaluate(f"(() => {{ const e = {element}; if (!e) return null; const r = e.getBoundingClientRect();"
                            f" return [r.x + r.width / 2, r.y + r.height / 2]; }})()")
        if box is None:
            return False
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", type=kind, x=box[0], y=box[1], button="left", clickCount=1)
        time.sleep(0.8)
        return True

    def key(self, name: str, code: int) -> None:
        for kind in ("keyDown", "keyUp"):
            self.call("Input.dispatchKeyEvent", type=kind, key=name, windowsVirtualKeyCode=code)
        time.sleep(0.5)

    def screenshot(self, path: Path, clip: str) -> None:
        """Saves the part of the page that the JavaScript expression `clip` bounds ([x, y, width, height])."""
        time.sleep(1.5)  # fonts and late layout
        x, y, width, height = self.evaluate(clip)
        data = self.call("Page.captureScreenshot", format="png",
                         clip={"x": x, "y": y, "width": width, "height": height, "scale": 1})["data"]
        path.write_bytes(base64.b64decode(data))
        print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")

    def close(self) -> None:
        self.opened.close()
        stop(self.process)


def by_component(component_id: str) -> str:
    return f"document.querySelector('[data-component-id=\"{component_id}\"]')"


def button(label: str) -> str:
    return f"[...document.querySelectorAll('button')].find(e => e.getAttribute('aria-label') === {label!r})"


def dismiss_popups(browser: Browser) -> None:
    """Closes what the UI opens by itself over the table once its data has loaded: its assistant panel (on
    loopback) and the "Detect issues" tip. Each is waited for a while, as it may come late on a busy machine."""
    pending = {ASSISTANT_CLOSE, "mlflow.detect_issues.guidance.got_it"}
    for _ in range(20):
        pending -= {popup for popup in pending if browser.click(by_component(popup))}
        if not pending:
            return
        time.sleep(0.5)


def without_assistant(browser: Browser) -> None:
    """Closes the assistant panel should it have opened after all, and waits until it is gone."""
    browser.click(by_component(ASSISTANT_CLOSE))
    browser.wait(f"!{by_component(ASSISTANT_CLOSE)}", "the page without its assistant panel")


def show_columns(browser: Browser, wanted: dict[str, bool]) -> None:
    """Shows or hides the traces table's columns through its own Display > Columns menu."""
    browser.click(button("Display"))
    browser.click("[...document.querySelectorAll('[role=menuitem]')].find(e => e.innerText.includes('Columns'))")
    for name, shown in wanted.items():
        item = f"[...document.querySelectorAll('[role=menuitemcheckbox]')].find(e => e.innerText.trim() === {name!r})"
        if browser.evaluate(f"{item}?.getAttribute('aria-checked') === 'true'") != shown:
            browser.click(item)
    browser.key("Escape", 27)
    browser.key("Escape", 27)


def traces_list(browser: Browser, ui: str, experiment_id: str, path: Path) -> None:
    """The traces tab: each request with its question, answer, rating and tenant."""
    browser.call("Page.navigate", url=f"{ui}/#/experiments/{experiment_id}/traces")
    browser.wait("document.body.innerText.includes('user_rating')", "the user_rating column")
    dismiss_popups(browser)
    show_columns(browser, {"Tokens": False, "Tags": False, TRACE_TENANT_TAG: True})
    browser.click(by_component("mlflow_header.toggle_sidebar_button"))
    without_assistant(browser)
    browser.wait("[...document.querySelectorAll('[role=columnheader]')].some(e => e.innerText.includes('tenant')"
                 " && e.getBoundingClientRect().right <= innerWidth)", "the user_rating and tenant columns in view")
    browser.screenshot(path, "(() => { const rows = [...document.querySelectorAll('[role=row]')];"
                             " return [0, 0, innerWidth, rows[rows.length - 1].getBoundingClientRect().bottom + 16]; })()")


def trace_detail(browser: Browser, ui: str, experiment_id: str, trace_id: str, path: Path) -> None:
    """One trace opened: its spans, question and answer, and the feedback pane with the rating expanded."""
    browser.call("Page.navigate", url=f"{ui}/#/experiments/{experiment_id}/traces?selectedEvaluationId={trace_id}")
    pane = by_component("shared.model-trace-explorer.assessments-pane-toggle")
    expand = by_component("shared.model-trace-explorer.toggle-assessment-expanded")
    browser.wait(f"!!{expand} || !!{pane}", "the trace")
    dismiss_popups(browser)  # time enough for the feedback pane to open by itself, as it does for a rated trace
    browser.click(pane)
    browser.wait(f"!!{expand}", "the feedback pane")
    browser.click(expand)
    without_assistant(browser)
    browser.screenshot(path, "(() => { const r = document.querySelector('[role=dialog]').getBoundingClientRect();"
                             " return [r.x, 0, r.width, Math.min(innerHeight, 680)]; })()")


def window_size(text: str) -> tuple[int, int]:
    found = re.fullmatch(r"(\d{3,4})x(\d{3,4})", text)
    if found is None:
        raise argparse.ArgumentTypeError(f"expected WIDTHxHEIGHT in pixels, like 1600x1000, got {text!r}")
    return int(found.group(1)), int(found.group(2))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs/images", help="folder of the PNGs")
    parser.add_argument("--size", type=window_size, default="1600x1000", help="the browser window, WIDTHxHEIGHT")
    args = parser.parse_args(argv)
    width, height = args.size
    try:
        check_tools()
    except UserError as e:
        print(f"screenshot_traces: error: {e}", file=sys.stderr)
        return 2
    import mlflow

    from serving.loopback import free_port

    folder = Path(tempfile.mkdtemp(prefix="ragtune-screenshot-"))
    server = mlflow_server(folder, port := free_port())
    browser = None
    try:
        ui = f"http://127.0.0.1:{port}"
        mlflow.set_tracking_uri(ui)
        experiment_id, opened = serve_and_rate(folder / "cache")
        browser = Browser(folder, free_port(), width, height)
        args.out.mkdir(parents=True, exist_ok=True)
        traces_list(browser, ui, experiment_id, args.out / "mlflow-production-traces.png")
        trace_detail(browser, ui, experiment_id, opened, args.out / "mlflow-production-trace-feedback.png")
    except TimeoutError as e:
        print(f"screenshot_traces: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("screenshot_traces: interrupted", file=sys.stderr)
        return 130
    finally:
        if browser is not None:
            browser.close()
        stop(server)
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
