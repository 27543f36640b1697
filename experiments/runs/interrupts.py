"""SIGTERM (timeout, CI cancellation, docker stop) ends a run like Ctrl-C, and neither is ever lost.

The handler raises `Interrupted` where the main thread is. Code that swallows every exception can eat that
raise: an exception raised inside a ctypes callback (llama.cpp's log hook, say) or a weakref callback is dropped,
and Python prints it as "Exception ignored in ..." with a traceback. So the signal is also remembered, long loops
call `raise_if_interrupted()` at each step to raise it again, and that dropped raise is not printed.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


class Interrupted(KeyboardInterrupt):
    """A termination signal, unwinding like Ctrl-C so the MLflow run ends KILLED."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


_received: list[int] = []
_deferring = 0


def _on_signal(signum: int, _frame: FrameType | None) -> None:
    _received.append(signum)
    if not _deferring:
        raise Interrupted(signum)


def _drop_unraisable_interrupt(unraisable: sys.UnraisableHookArgs) -> None:
    """Python's hook for exceptions it cannot raise, quiet for ours: `raise_if_interrupted()` raises it again."""
    if not isinstance(unraisable.exc_value, Interrupted):
        sys.__unraisablehook__(unraisable)


def install(*signums: int) -> None:
    """Turns each signal into `Interrupted` (run.py: SIGTERM and SIGINT), except one the process was started
    ignoring (`nohup`, a shell's background job), which stays ignored."""
    for signum in signums:
        if signal.getsignal(signum) is not signal.SIG_IGN:
            signal.signal(signum, _on_signal)
    sys.unraisablehook = _drop_unraisable_interrupt


@contextmanager
def deferred() -> Iterator[None]:
    """A signal that arrives inside the block is raised when the block ends: for a step that must not stop half
    done, such as making an event loop that must then be closed."""
    global _deferring
    arrived = len(_received)
    _deferring += 1
    try:
        yield
    finally:
        _deferring -= 1
    if len(_received) > arrived:
        raise Interrupted(_received[-1])


def raise_if_interrupted() -> None:
    """Raises `Interrupted` again when a signal arrived and its first raise was swallowed."""
    if _received:
        raise Interrupted(_received[-1])
