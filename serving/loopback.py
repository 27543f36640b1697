"""Loopback servers started as subprocesses (the audit's `mlflow models serve`, the tests' servers): a free port,
and waiting until one answers."""

import socket
import subprocess
import time
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_until_up(url: str, server: subprocess.Popen, log: Path, seconds: float = 120) -> None:
    """Polls `url` until it answers 200; fails with the log's tail if the server exits or never answers."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if server.poll() is not None:
            break
        time.sleep(0.5)
    server.kill()
    raise RuntimeError(f"{url} did not come up:\n{log.read_text()[-3000:]}")
