"""SIGTERM (timeout, CI cancellation, docker stop) ends a run like Ctrl-C, and neither is ever lost.

The handler raises `Interrupted` where the main thread is. Code that swallows every exception can eat that
raise: an exception raised inside a ctypes callback (llama.cpp's log hook, say) is printed and dropped. So the
signal is also remembered, and long loops call `raise_if_interrupted()` at each step to raise it again.
"""

from __future__ import annotations

import signal
from types import FrameType


class Interrupted(KeyboardInterrupt):
    """A termination signal, unwinding like Ctrl-C so the MLflow run ends KILLED."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


_received: list[int] = []


def _on_signal(signum: int, _frame: FrameType | None) -> None:
    _received.append(signum)
    raise Interrupted(signum)


def install(*signums: int) -> None:
    """Turns each signal into `Interrupted` (run.py: SIGTERM and SIGINT), except one the process was started
    ignoring (`nohup`, a shell's background job), which stays ignored."""
    for signum in signums:
        if signal.getsignal(signum) is not signal.SIG_IGN:
            signal.signal(signum, _on_signal)


def raise_if_interrupted() -> None:
    """Raises `Interrupted` again when a signal arrived and its first raise was swallowed."""
    if _received:
        raise Interrupted(_received[-1])
