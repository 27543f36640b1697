import contextlib
import os
import signal

import pytest

from experiments import interrupts


@pytest.fixture
def usr1():
    previous = signal.getsignal(signal.SIGUSR1)
    interrupts.install(signal.SIGUSR1)
    yield
    signal.signal(signal.SIGUSR1, previous)
    interrupts._received.clear()


def test_a_swallowed_signal_is_raised_again_at_the_next_step(usr1):
    interrupts.raise_if_interrupted()  # nothing arrived yet
    with contextlib.suppress(BaseException):  # as inside a ctypes callback, whose exceptions are dropped
        os.kill(os.getpid(), signal.SIGUSR1)
    with pytest.raises(interrupts.Interrupted) as raised:
        interrupts.raise_if_interrupted()
    assert raised.value.signum == signal.SIGUSR1 and isinstance(raised.value, KeyboardInterrupt)


def test_a_signal_the_process_was_started_ignoring_stays_ignored():
    """`nohup python run.py &`: a shell starts background jobs ignoring SIGINT, and run.py must not undo that."""
    previous = signal.getsignal(signal.SIGUSR2)
    signal.signal(signal.SIGUSR2, signal.SIG_IGN)
    try:
        interrupts.install(signal.SIGUSR2)
        assert signal.getsignal(signal.SIGUSR2) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGUSR2, previous)
