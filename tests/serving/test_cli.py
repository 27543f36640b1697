"""`ragtune`'s dispatch and exit-code policy; each command's own behaviour is tested with its module."""

import importlib
import signal
import sys
import types

import pytest

from experiments.runs.interrupts import Interrupted
from pipelines.errors import UserError
from serving import cli


@pytest.fixture(autouse=True)
def process_state(monkeypatch):
    """run_command sets up the process as an entry point would: put the test process back afterwards."""
    handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    monkeypatch.setattr(sys, "unraisablehook", sys.unraisablehook)
    yield
    for signum, handler in handlers.items():
        signal.signal(signum, handler)


def test_help_lists_every_command_and_each_has_a_main():
    text = cli.usage()
    for name, command in cli.COMMANDS.items():
        assert f"  {name} " in text
        assert callable(importlib.import_module(command.module).main), name


@pytest.mark.parametrize("name", list(cli.COMMANDS))
def test_every_command_answers_help_with_exit_0(name, capsys):
    with pytest.raises(SystemExit) as stopped:  # argparse's --help exits 0 itself
        raise SystemExit(cli.run_command(name, ["--help"]))
    assert stopped.value.code == 0
    assert capsys.readouterr().out.strip()


def test_no_command_or_an_unknown_one_is_a_user_mistake(capsys):
    assert cli.main([]) == 2
    assert cli.main(["--help"]) == 0
    assert cli.main(["nope"]) == 2
    assert capsys.readouterr().err == (
        "ragtune: unknown command 'nope'; choose from compare, gate, promote, serve, traces, online-report, harvest, audit, calibrate, "
        "train-grader, cache, testset, doc-sets, config-docs, metrics-docs, architecture-docs\n"
    )


@pytest.fixture
def command(monkeypatch):
    """Registers a command whose main raises what the test hands it (or returns it, if it is an int)."""
    module = types.ModuleType("ragtune_test_command")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setitem(cli.COMMANDS, "probe", cli.Command(module.__name__, "a test command", own_signals=True))

    def set_outcome(outcome):
        def main(argv):
            if isinstance(outcome, int):
                return outcome
            raise outcome

        module.main = main

    return set_outcome


@pytest.mark.parametrize(("outcome", "code", "line"), [
    (0, 0, ""),
    (1, 1, ""),  # a failed check (gate, leak) is the command's own 1
    (UserError("dataset.golden: required"), 2, "ragtune probe: error: dataset.golden: required\n"),
    (KeyboardInterrupt(), 130, "ragtune probe: interrupted by SIGINT\n"),
    (Interrupted(signal.SIGTERM), 143, "ragtune probe: interrupted by SIGTERM\n"),
])
def test_the_exit_code_policy(command, capsys, outcome, code, line):
    command(outcome)
    assert cli.main(["probe"]) == code
    assert capsys.readouterr().err == line


def test_an_unknown_mlflow_model_is_a_user_mistake_and_a_bug_keeps_its_traceback(command, capsys):
    from mlflow.exceptions import MlflowException

    command(MlflowException("Registered Model with name=handbook not found"))
    assert cli.main(["probe"]) == 2
    assert capsys.readouterr().err == "ragtune probe: error: Registered Model with name=handbook not found\n"
    command(ZeroDivisionError("division by zero"))
    assert cli.main(["probe"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("Traceback") and err.endswith("ZeroDivisionError: division by zero\n")


@pytest.mark.parametrize("override, why", [
    ("serve.port=abc", "Error merging override serve.port=abc: Value 'abc' of type 'str' could not be converted to "
                       "Integer"),
    ("serve.variants.champion=abc", "could not be converted to Float"),
])
def test_an_override_of_the_wrong_type_is_one_line_naming_it(capsys, override, why):
    assert cli.main(["serve", "model=models:/handbook", override]) == cli.EXIT_USER_ERROR
    err = capsys.readouterr().err
    assert err.startswith("ragtune serve: error: Error merging override") and why in err and err.count("\n") == 1
