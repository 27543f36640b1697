"""`serve.workers=N`'s supervising process: serve.py checks and downloads what the workers need, then execs
`python -m serving.supervise`, which keeps serve.py's pid, signals and exit codes but none of its libraries (on
the demo serve.py holds ~590 MB of them; this process, ~30 MB). It runs the workers (serving/supervisor.py) until
one cannot load or start, or SIGINT/SIGTERM, and removes what the workers wrote in the folder they shared."""

from __future__ import annotations

import signal
import sys

import uvicorn

from pipelines.errors import UserError
from serving.cli import EXIT_FAILED, EXIT_USER_ERROR
from serving.http.worker_folder import WorkerPlan
from serving.supervisor import Supervisor

# What uvicorn runs in each worker: a factory of its app; and what the fork server imports once for them all.
WORKER_APP = "serving.serve_worker:worker_app"
PRELOAD = ("serving.serve_worker", "serving.fork_server")
ERROR = "ragtune serve: error:"


def main() -> int:
    plan = WorkerPlan.from_env()
    config = uvicorn.Config(WORKER_APP, factory=True, host=plan.host, port=plan.port, log_level="warning")
    supervisor = Supervisor(config, plan.workers, preload=PRELOAD)
    try:
        supervisor.run()
        failure = plan.shared.failure()
    except UserError as e:  # the port is taken
        print(f"{ERROR} {e}", file=sys.stderr)
        return EXIT_USER_ERROR
    finally:
        plan.shared.remove()
    if failure is not None:
        where = "" if failure.user else " (its traceback above)"
        print(f"{ERROR} worker {failure.pid}: {failure.message}{where}", file=sys.stderr)
        return EXIT_USER_ERROR if failure.user else EXIT_FAILED
    if supervisor.stopped_by is None:  # a worker could not start (its error above)
        print(f"{ERROR} a worker failed to start (its error above)", file=sys.stderr)
        return EXIT_FAILED
    signal.signal(supervisor.stopped_by, signal.SIG_DFL)
    signal.raise_signal(supervisor.stopped_by)  # it ends by the signal, as one serve.py process does
    return 0


if __name__ == "__main__":
    sys.exit(main())
