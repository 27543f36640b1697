"""What the processes of `serve.workers=N` share: the plan serve.py hands each worker in its environment, and a
folder serve.py makes for the server's lifetime, which holds a ready mark per worker that has loaded (so /readyz
of any worker says whether all have), the first worker's failure (so serve.py can stop with it), and
prometheus-client's multiprocess files (`metrics/`)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path

from pipelines.errors import UserError
from pipelines.processes import alive

READY, ANNOUNCED, FAILURE, METRICS = "ready-", "announced", "failure.json", "metrics"
# Written by `WorkerFolder.make` alone: `remove` deletes nothing in a folder without it.
MARKER = ".ragtune-serve-workers"
# What the server writes, by name: a ready mark per worker pid, and prometheus-client's multiprocess files
# (`<type>_<pid>.db`, prometheus_client/values.py).
WRITTEN = re.compile(rf"{READY}\d+|{ANNOUNCED}|{re.escape(FAILURE)}")
METRIC_FILE = re.compile(r"(counter|gauge_[a-z]+|histogram|summary)_\d+\.db")
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

    @classmethod
    def make(cls, workers: int, parent: Path | None = None) -> WorkerFolder:
        """A new temporary folder (under `parent`, default the system's), with its `metrics/` and the marker that
        lets `remove` delete it."""
        folder = cls(Path(tempfile.mkdtemp(prefix="ragtune-serve-", dir=parent)), workers)
        folder.metrics.mkdir()
        (folder.path / MARKER).touch()
        return folder

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
        """Deletes what the server wrote here, by name (ready marks, the announcement, the failure record,
        prometheus-client's files), then its marker and the folder if that left it empty. The folder comes from an
        environment variable: one `make` did not create (no marker) is left as it is, and a symlink is never
        followed."""
        marker = self.path / MARKER
        if self.path.is_symlink() or marker.is_symlink() or not marker.is_file():
            return
        written = [f for f in self.path.iterdir() if WRITTEN.fullmatch(f.name)]
        if self.metrics.is_dir() and not self.metrics.is_symlink():
            written += [f for f in self.metrics.iterdir() if METRIC_FILE.fullmatch(f.name)]
        for file in [*written, marker]:
            if file.is_file() and not file.is_symlink():
                file.unlink()
        for folder in (self.metrics, self.path):
            with contextlib.suppress(OSError):  # not empty (someone else's files), a symlink, or gone
                folder.rmdir()

    def failure(self) -> WorkerFailure | None:
        try:
            return WorkerFailure(**json.loads((self.path / FAILURE).read_text(encoding="utf-8")))
        except FileNotFoundError:
            return None
