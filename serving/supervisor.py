"""The processes of `serve.workers=N`: N uvicorn servers of one app factory on one address, restarted when one dies,
stopped together when one cannot start or on SIGINT/SIGTERM.

uvicorn has a supervisor of its own (`--workers`), which does not fit two ways, both measured on the demo:
- it passes every worker the one socket it bound, and each worker's event loop accepts every connection waiting
  on it at once, so connections pile on whichever worker wakes first (19 of 20 requests sent at once went to one
  worker, and 11 were refused by its serve.max_pending). Here each worker listens on its own socket bound with
  SO_REUSEPORT, and the kernel spreads new connections among them;
- it spawns each worker, which then imports serve.py's libraries anew (haystack imports torch): about 520 MB of
  each worker's own memory, half a worker's RSS. Here the workers are forked from one fork server that imported
  them once and froze its garbage collector (serving/fork_server.py), so they share those pages.
"""

from __future__ import annotations

import logging
import multiprocessing
import signal
import socket
import sys
from collections.abc import Sequence
from multiprocessing.connection import wait
from multiprocessing.process import BaseProcess

import uvicorn
from uvicorn.config import STARTUP_FAILURE

from pipelines.errors import ConfigError

logger = logging.getLogger("ragtune.serve")
# Seconds between the supervisor's looks at its workers (it wakes at once when one ends).
POLL_SECONDS = 0.5


def shared_address(host: str, port: int) -> socket.socket:
    """A socket bound to host:port with SO_REUSEPORT, which the kernel lets every worker's socket share (only
    processes of the same user may)."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    return sock


def serve_worker(config: uvicorn.Config) -> None:
    """A worker process: its own socket on the shared address, served by uvicorn."""
    config.configure_logging()
    try:
        sock = shared_address(config.host, config.port)
    except OSError as e:
        print(f"worker: cannot listen on {config.host}:{config.port}: {e.strerror}", file=sys.stderr)
        raise SystemExit(STARTUP_FAILURE) from None
    uvicorn.Server(config).run(sockets=[sock])


class Supervisor:
    """Runs `workers` processes of `config` (an app factory), forked from a fork server that imports `preload`."""

    def __init__(self, config: uvicorn.Config, workers: int, preload: Sequence[str]) -> None:
        self.config, self.workers = config, workers
        self.context = multiprocessing.get_context("forkserver")
        self.context.set_forkserver_preload(list(preload))
        # The signal that stopped the workers, if one did; else a worker failed to start (its exit code said so).
        self.stopped_by: signal.Signals | None = None

    def run(self) -> None:
        """Until a worker fails to start, or SIGINT or SIGTERM: then every worker is stopped and joined."""
        try:
            reserved = shared_address(
                self.config.host, self.config.port
            )  # taken: fail here, before any worker
        except OSError as e:
            raise ConfigError(
                f"config key 'serve.port': {self.config.host}:{self.config.port}: {e.strerror}"
            ) from None
        handlers = {sig: signal.signal(sig, self._stop) for sig in (signal.SIGINT, signal.SIGTERM)}
        processes = [self._start() for _ in range(self.workers)]
        try:
            while self.stopped_by is None:
                wait([p.sentinel for p in processes], timeout=POLL_SECONDS)
                ended = [i for i, p in enumerate(processes) if p.exitcode is not None]
                if any(processes[i].exitcode == STARTUP_FAILURE for i in ended):
                    return
                for i in ended:
                    logger.warning(
                        "serve: worker %d ended (exit code %s); starting another",
                        processes[i].pid,
                        processes[i].exitcode,
                    )
                    processes[i] = self._start()
        finally:
            for process in processes:
                if process.exitcode is None:
                    process.terminate()
            for process in processes:
                process.join()
            reserved.close()
            for sig, handler in handlers.items():
                signal.signal(sig, handler)

    def _start(self) -> BaseProcess:
        process = self.context.Process(target=serve_worker, args=(self.config,), name="ragtune-serve-worker")
        process.start()
        return process

    def _stop(self, signum: int, _frame: object) -> None:
        self.stopped_by = signal.Signals(signum)
