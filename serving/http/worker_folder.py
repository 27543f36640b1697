"""What the processes of `serve.workers=N` share: the plan serve.py hands each worker in its environment, and a
folder serve.py makes for the server's lifetime, which holds a ready mark per worker that has loaded (so /readyz
of any worker says whether all have), the first worker's failure (so serve.py can stop with it), and
prometheus-client's multiprocess files (`metrics/`)."""

from __future__ import annotations

import contextlib
import json
import os
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path

from pipelines.errors import UserError
from pipelines.processes import alive

READY, ANNOUNCED, FAILURE, METRICS = "ready-", "announced", "failure.json", "metrics"
# The plan, as JSON, in each worker's environment (a spawned process inherits it).
PLAN_ENV = "RAGTUNE_SERVE_WORKERS"


@dataclass(frozen=True)
class PlannedVariant:
    """A variant (or the shadow) as serve.py looked it up, and the bundle folder it downloaded for it. Plain data:
    the supervising process reads this module and must not import serve.py's libraries."""

    name: str
    uri: str
    version: str
    weight: float
    bundle: str


@dataclass(frozen=True)
class WorkerPlan:
    """What every worker serves, decided once by serve.py: its overrides, the model URI, the MLflow store it
    connected to, the shared folder, the address, and the variants and shadow with their downloaded bundles, so
    that no worker looks a version up or downloads a bundle again."""

    argv: list[str]
    uri: str
    tracking_uri: str
    folder: str
    workers: int
    host: str
    port: int
    variants: list[PlannedVariant]
    shadow: PlannedVariant | None

    @property
    def shared(self) -> WorkerFolder:
        return WorkerFolder(Path(self.folder), self.workers)

    @property
    def bundles(self) -> dict[str, Path]:
        """Each variant's and the shadow's bundle folder, by its URI."""
        return {p.uri: Path(p.bundle) for p in [*self.variants, *([self.shadow] if self.shadow else [])]}

    def to_env(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_env(cls) -> WorkerPlan:
        plan = json.loads(os.environ[PLAN_ENV])
        shadow = plan.pop("shadow")
        return cls(
            **plan
            | {
                "variants": [PlannedVariant(**v) for v in plan["variants"]],
                "shadow": PlannedVariant(**shadow) if shadow else None,
            }
        )


@dataclass(frozen=True)
class WorkerFailure:
    """A worker's failure as the parent reports it: one line, and whether it is the user's to fix (a bug's
    traceback is on the worker's stderr)."""

    pid: int
    message: str
    user: bool


@dataclass(frozen=True)
class WorkerFolder:
    """The shared folder of `workers` processes."""

    path: Path
    workers: int

    @property
    def metrics(self) -> Path:
        return self.path / METRICS

    def mark_ready(self) -> bool:
        """Marks this worker loaded; True for the one worker whose mark completes the set, the first time only
        (it says the server is ready, once: a worker uvicorn restarts later finds it said)."""
        (self.path / f"{READY}{os.getpid()}").touch()
        if not self.all_ready():
            return False
        try:
            os.close(os.open(self.path / ANNOUNCED, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return False
        return True

    def all_ready(self) -> bool:
        """Every worker has loaded: as many ready marks of running processes as workers (a worker that died
        leaves its mark; the one uvicorn starts in its place counts once it has loaded)."""
        running = [mark for mark in self.path.glob(f"{READY}*") if alive(int(mark.name.removeprefix(READY)))]
        return len(running) >= self.workers

    def fail(self, error: BaseException) -> None:
        """Records this worker's failure for the parent (the first one wins); a bug's traceback goes to stderr."""
        user = isinstance(error, UserError)
        if not user:
            traceback.print_exception(error)
        failure = {
            "pid": os.getpid(),
            "message": str(error).splitlines()[0] if str(error) else repr(error),
            "user": user,
        }
        try:
            with open(self.path / FAILURE, "x", encoding="utf-8") as out:
                json.dump(failure, out)
        except FileExistsError:
            pass

    def remove(self) -> None:
        """Deletes what the server wrote here (ready marks, the announcement, the failure record, prometheus-client's
        `*.db` files), then the folder if that left it empty. The folder comes from an environment variable, so
        nothing else in it is touched, and a symlink is never followed."""
        if self.path.is_symlink() or not self.path.is_dir():
            return
        metrics = self.metrics
        written = [*self.path.glob(f"{READY}*"), self.path / ANNOUNCED, self.path / FAILURE]
        if metrics.is_dir() and not metrics.is_symlink():
            written += metrics.glob("*.db")
        for file in written:
            if file.is_file() and not file.is_symlink():
                file.unlink()
        for folder in (metrics, self.path):
            with contextlib.suppress(OSError):  # not empty (someone else's files), a symlink, or gone
                folder.rmdir()

    def failure(self) -> WorkerFailure | None:
        try:
            return WorkerFailure(**json.loads((self.path / FAILURE).read_text(encoding="utf-8")))
        except FileNotFoundError:
            return None
