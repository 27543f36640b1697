"""RAGAS scores are coroutines: they all run on one event loop per process, made with signals deferred and closed
at exit.

`asyncio.run` per score made and closed a loop thousands of times a run. A SIGTERM that landed while one was being
made (the loop existed, but asyncio.Runner had not yet marked itself initialised, so its close skipped it) left the
loop unclosed, and at exit Python printed a traceback from `BaseEventLoop.__del__`.
"""

from __future__ import annotations

import asyncio
import atexit
from collections.abc import Coroutine
from typing import Any, TypeVar

from experiments.runs.interrupts import deferred

T = TypeVar("T")
_runner: asyncio.Runner | None = None


def run_coroutine(coroutine: Coroutine[Any, Any, T]) -> T:
    """Runs `coroutine` to its end on the process's scoring loop."""
    return _scoring_runner().run(coroutine)


def _scoring_runner() -> asyncio.Runner:
    global _runner
    if _runner is None:
        with deferred():  # the loop exists and is registered for closing, or neither
            runner = asyncio.Runner()
            runner.get_loop()
            atexit.register(runner.close)
            _runner = runner
    return _runner
