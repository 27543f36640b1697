"""`ragtune <command> ...`: every command but the experiment itself (`python run.py`), with one exit-code policy.

0 ok; 1 a check failed (the gate, a leak found by the audit) or a bug (with its traceback); 2 a mistake the user can
fix, said in one line; 130/143 interrupted by SIGINT/SIGTERM. It lives in serving/, the top package, because it
reaches every layer; each command is imported only when it runs, so `ragtune --help` is instant.
"""

from __future__ import annotations

import importlib
import signal
import sys
import traceback
from collections.abc import Sequence
from dataclasses import dataclass

EXIT_OK, EXIT_FAILED, EXIT_USER_ERROR = 0, 1, 2
EXIT_SIGNAL = {signal.SIGINT: 130, signal.SIGTERM: 143}


@dataclass(frozen=True)
class Command:
    module: str  # has `main(argv) -> int`
    summary: str
    own_signals: bool = False  # the command stops gracefully on SIGTERM by itself (uvicorn)


COMMANDS = {
    "compare": Command("experiments.comparison.compare", "table, chart and paired tests of runs or of a sweep"),
    "gate": Command("experiments.comparison.gate", "fail (exit 1) when a candidate run regressed against a baseline"),
    "promote": Command("serving.promote", "register a run as a model and move an alias after the gate"),
    "serve": Command("serving.serve_command", "serve a promoted model over HTTP with tenant scoping", own_signals=True),
    "traces": Command("serving.online.retention", "prune a served model's traces past serve.trace.retention_days"),
    "online-report": Command("serving.online.report", "compare a served model's variants on production traces"),
    "harvest": Command("serving.online.harvest", "production failures as golden-set candidates; append reviewed ones"),
    "audit": Command("serving.audit.run", "probe every serving path for cross-tenant leaks (exit 1 on a leak)"),
    "calibrate": Command("experiments.tuning.calibrate", "fit CRAG's thresholds on a golden set"),
    "train-grader": Command("experiments.tuning.train_grader", "train CRAG's cross-encoder grader offline"),
    "cache": Command("experiments.runs.cache", "list or prune the index snapshots"),
    "testset": Command("experiments.datasets.testset", "write a golden set from a corpus that has none (offline)"),
    "doc-sets": Command("experiments.datasets.doc_sets", "build the validation sets from Debian package docs"),
    "config-docs": Command("serving.config_docs", "write docs/config.md, the config reference, from conf/"),
    "metrics-docs": Command("experiments.runs.metrics_docs", "write docs/metrics.md, the metrics reference, from the code"),
    "architecture-docs": Command("serving.architecture_docs", "write docs/architecture.md's layout from the code tree"),
}


def usage() -> str:
    width = max(map(len, COMMANDS))
    lines = [f"  {name:<{width}}  {command.summary}" for name, command in COMMANDS.items()]
    return "\n".join(
        ["usage: ragtune <command> [args]   (`ragtune <command> --help` for its options)", "", "commands:", *lines,
         "", "The experiment itself: python run.py [overrides]  (Hydra; -m for a sweep)"]
    )


def run_command(name: str, argv: Sequence[str]) -> int:
    """Runs one command under the exit-code policy."""
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    from experiments.runs import interrupts
    from experiments.runs.process import quiet_libraries, set_env_defaults
    from pipelines.errors import UserError

    set_env_defaults()
    quiet_libraries()
    command = COMMANDS[name]
    if not command.own_signals:
        interrupts.install(signal.SIGTERM, signal.SIGINT)
    sys.argv[0] = f"ragtune {name}"  # argparse's prog in usage lines and errors
    try:
        return importlib.import_module(command.module).main(list(argv))
    except KeyboardInterrupt as e:
        signum = e.signum if isinstance(e, interrupts.Interrupted) else signal.SIGINT
        print(f"ragtune {name}: interrupted by {signal.Signals(signum).name}", file=sys.stderr)
        return EXIT_SIGNAL[signum]
    except (UserError, OmegaConfBaseException, HydraException) as e:
        # Hydra's override errors say what they tried; their cause says why (e.g. a value of the wrong type).
        why = str(e.__cause__).splitlines()[0] if isinstance(e, HydraException) and e.__cause__ else ""
        print(f"ragtune {name}: error: {e}{f': {why}' if why else ''}", file=sys.stderr)
        return EXIT_USER_ERROR
    except Exception as e:  # noqa: BLE001
        from mlflow.exceptions import MlflowException

        if isinstance(e, MlflowException):  # an unknown run, model, version or alias
            print(f"ragtune {name}: error: {e.message}", file=sys.stderr)
            return EXIT_USER_ERROR
        traceback.print_exc()
        return EXIT_FAILED


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(usage())
        return EXIT_OK if args else EXIT_USER_ERROR
    if args[0] not in COMMANDS:
        print(f"ragtune: unknown command {args[0]!r}; choose from {', '.join(COMMANDS)}", file=sys.stderr)
        return EXIT_USER_ERROR
    return run_command(args[0], args[1:])


if __name__ == "__main__":
    sys.exit(main())
