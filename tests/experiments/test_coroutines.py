"""RAGAS scores run on one event loop per process that a signal cannot leave unclosed.

The probe scores in a loop and takes SIGTERM at a random moment, as run.py does when a run is cancelled. With
`asyncio.run` per score a signal landing while a loop was being made left it unclosed, and Python printed a
traceback from `BaseEventLoop.__del__` at exit (the flake of test_a_signal_during_evaluation_ends_...).
"""

import subprocess
import sys

from experiments.evaluation.coroutines import run_coroutine
from tests.support.paths import ROOT

PROBE = """
import asyncio, os, random, signal, sys, threading
from experiments.runs import interrupts
from experiments.evaluation.coroutines import run_coroutine
interrupts.install(signal.SIGTERM)
async def score():
    return 1.0
threading.Timer(random.uniform(0.02, 0.2), lambda: os.kill(os.getpid(), signal.SIGTERM)).start()
try:
    while True:
        {call}(score())
except KeyboardInterrupt:
    sys.exit(143)
"""
RUNS = 12  # asyncio.run printed the traceback in 18 of 40 runs on this probe


def noisy_exits(call: str) -> int:
    noisy = 0
    for _ in range(RUNS):
        result = subprocess.run([sys.executable, "-c", PROBE.format(call=call)], cwd=ROOT, capture_output=True,
                                text=True, timeout=60)
        assert result.returncode == 143, result.stderr
        noisy += "Exception ignored" in result.stderr or "Traceback" in result.stderr
    return noisy


def test_a_signal_while_scoring_never_leaves_an_event_loop_unclosed():
    assert noisy_exits("run_coroutine") == 0


def test_the_probe_catches_the_loop_asyncio_run_left_unclosed():
    assert noisy_exits("asyncio.run") > 0


def test_every_score_runs_on_the_one_loop():
    async def loop_of_this_score():
        import asyncio

        return asyncio.get_running_loop()

    first = run_coroutine(loop_of_this_score())
    assert run_coroutine(loop_of_this_score()) is first and not first.is_closed()
