import contextlib
import os
import signal

import pytest

from experiments.runs import interrupts


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


def test_a_signal_raised_inside_a_weakref_callback_is_not_printed_but_raised_again(usr1, capsys):
    import gc
    import weakref

    class Owner:
        pass

    def on_collect():  # where the signal happens to land: Python cannot raise it there and drops it
        os.kill(os.getpid(), signal.SIGUSR1)

    owner = Owner()
    weakref.finalize(owner, on_collect)
    del owner
    gc.collect()
    assert "Traceback" not in capsys.readouterr().err
    with pytest.raises(interrupts.Interrupted):
        interrupts.raise_if_interrupted()
    weakref.finalize(Owner(), lambda: 1 / 0)  # any other dropped exception is still reported
    gc.collect()
    assert "ZeroDivisionError" in capsys.readouterr().err


def test_a_signal_inside_a_deferred_step_is_raised_when_the_step_ends(usr1):
    finished = []
    with pytest.raises(interrupts.Interrupted) as raised, interrupts.deferred():
        os.kill(os.getpid(), signal.SIGUSR1)
        finished.append("the step")
    assert finished == ["the step"] and raised.value.signum == signal.SIGUSR1
    interrupts._received.clear()
    with interrupts.deferred():  # a step with no signal ends quietly
        pass
