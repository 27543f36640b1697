"""A tiny app factory for tests of serve.py's supervisor: GET /pid answers the worker's pid. With $PID_APP_FAIL
set, a worker fails to start (uvicorn's STARTUP_FAILURE exit code)."""

import os

from fastapi import FastAPI
from uvicorn.config import STARTUP_FAILURE


def app() -> FastAPI:
    if os.environ.get("PID_APP_FAIL"):
        raise SystemExit(STARTUP_FAILURE)
    api = FastAPI()

    @api.get("/pid")
    def pid() -> dict[str, int]:
        return {"pid": os.getpid()}

    return api


if __name__ == "__main__":  # a supervisor of two workers of this app: python -m tests.support.pid_app PORT
    import sys

    import uvicorn

    from serving.supervisor import Supervisor

    config = uvicorn.Config(
        f"{__spec__.name}:app", factory=True, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning"
    )
    supervisor = Supervisor(config, 2, preload=[__spec__.name])
    supervisor.run()
    print(
        f"stopped by {supervisor.stopped_by.name if supervisor.stopped_by else 'a worker that failed to start'}"
    )
