"""MLflow plumbing: which store runs go to, how a config becomes params, and what identifies a run's code.

Every command resolves its store the same way: an explicit override or flag, then `$MLFLOW_TRACKING_URI`, then the
local default, so a run and its compare never look at different stores.
"""

from __future__ import annotations

import fcntl
import os
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import httpx
import mlflow
from mlflow.entities import Param
from mlflow.tracking import MlflowClient
from omegaconf import DictConfig, OmegaConf

from experiments.runs.config import PROJECT_DIR
from pipelines.errors import UserError
from pipelines.processes import alive
from pipelines.run_layout import GIT_COMMIT_TAG, HOST_TAG, PID_TAG, STALE_TAG

PARAM_VALUE_LIMIT = 6000
BATCH = 100
SQLITE = "sqlite:///"
LOCAL_DEFAULT = "sqlite:///mlruns/mlflow.db"
TRACKING_HELP = f"MLflow store (default: $MLFLOW_TRACKING_URI, else {LOCAL_DEFAULT})"
PROBE_SECONDS = 10.0
# Registry entries that name a run's or model's artifacts, not a place to keep them.
SCHEMES_NOT_ROOTS = {"runs", "models"}
# MLflow's HTTP client: a request that gets no answer in 10 s is retried once, so a silent server fails a call in
# about 21 s, not MLflow's default of minutes.
HTTP_DEFAULTS = {"MLFLOW_HTTP_REQUEST_TIMEOUT": "10", "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "1",
                 "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1"}


class TrackingError(UserError):
    """The MLflow store or artifact location cannot be used; the message names the config key."""


def resolve_tracking_uri(explicit: str | None = None) -> str:
    """An explicit value, else `$MLFLOW_TRACKING_URI`, else the local sqlite store.

    A sqlite path is made absolute (a relative one against the cwd) and its folder created.
    """
    uri = explicit or os.environ.get("MLFLOW_TRACKING_URI") or LOCAL_DEFAULT
    if not uri.startswith(SQLITE):
        return uri
    path = Path(uri[len(SQLITE) :]).resolve()  # sqlite:////abs/path keeps its leading slash
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise TrackingError(f"mlflow.tracking_uri: cannot create {path.parent} ({e.strerror or e})") from e
    return f"{SQLITE}{path}"


def connect(uri: str | None, key: str = "mlflow.tracking_uri", timeout: float = PROBE_SECONDS) -> str:
    """Points MLflow at the store and prints it; a server that is down, or up but silent, fails within `timeout`
    seconds, naming `key`. MLflow's own requests get a timeout and one retry (unless $MLFLOW_HTTP_REQUEST_TIMEOUT
    and $MLFLOW_HTTP_REQUEST_MAX_RETRIES say otherwise): left alone it retries a dead server for minutes."""
    resolved = resolve_tracking_uri(uri)
    if urlparse(resolved).scheme in {"http", "https"}:
        for name, value in HTTP_DEFAULTS.items():
            os.environ.setdefault(name, value)
        problem = unanswered(resolved, timeout)
        if problem is not None:
            raise TrackingError(
                f"{key}: MLflow tracking server {resolved} {problem}; start it, fix the URI, or unset "
                f"MLFLOW_TRACKING_URI to use the local store {LOCAL_DEFAULT}"
            )
    mlflow.set_tracking_uri(resolved)
    if resolved.startswith(SQLITE):
        _initialise_sqlite(Path(resolved[len(SQLITE) :]))
    print(f"MLflow tracking store: {resolved}", file=sys.stderr, flush=True)
    return resolved


def unanswered(url: str, timeout: float) -> str | None:
    """Why an HTTP server at `url` does not answer within `timeout` seconds (any reply, an error page too, is an
    answer); None when it answers."""
    try:
        httpx.get(f"{url.rstrip('/')}/health", timeout=timeout)
    except httpx.TimeoutException:
        return f"did not answer within {timeout:g} s"
    except httpx.HTTPError as e:
        return f"is unreachable ({e})"
    return None


def _initialise_sqlite(db: Path) -> None:
    """MLflow creates a new sqlite store's tables on first use; two jobs doing that at once break the migration."""
    with (db.parent / f".{db.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        MlflowClient().search_experiments(max_results=1)


def default_artifact_root(uri: str) -> Path | None:
    """Beside a sqlite store (`<db folder>/artifacts`); a tracking server chooses its own."""
    return Path(uri[len(SQLITE) :]).parent / "artifacts" if uri.startswith(SQLITE) else None


def use_experiment(mlflow_cfg: DictConfig | Mapping[str, Any], name: str) -> str:
    """Connects to the configured store and returns the experiment id, creating the experiment if needed.

    The artifact root is fixed when an experiment is created, so a bad root is refused before that happens, and
    a configured root that differs from an existing experiment's is pointed out rather than silently ignored.
    """
    uri = connect(mlflow_cfg.get("tracking_uri"))
    root = _artifact_root(mlflow_cfg.get("artifact_root"), uri)
    location = (root / name).as_uri() if isinstance(root, Path) else f"{root.rstrip('/')}/{name}" if root else None
    client = MlflowClient()
    experiment = client.get_experiment_by_name(name)
    if experiment is None:
        try:
            experiment_id = client.create_experiment(name, artifact_location=location)
        except mlflow.exceptions.MlflowException:  # a parallel sweep job created it first
            experiment_id = client.get_experiment_by_name(name).experiment_id
        return experiment_id
    if experiment.lifecycle_stage == "deleted":  # deleted in the UI: runs cannot be logged until restored
        client.restore_experiment(experiment.experiment_id)
    if location and mlflow_cfg.get("artifact_root") and experiment.artifact_location != location:
        print(
            f"warning: experiment '{name}' keeps its artifacts in {experiment.artifact_location}, set when it was "
            f"created; mlflow.artifact_root={mlflow_cfg.get('artifact_root')} applies only to new experiments "
            f"(set mlflow.experiment to start one)",
            file=sys.stderr,
        )
    mark_stale_runs(client, experiment.experiment_id)
    return experiment.experiment_id


def _artifact_root(configured: str | None, uri: str) -> Path | str | None:
    """The artifact location for new experiments, checked: a local folder (a Path) must be writable, a remote one (a
    URI) must use a scheme MLflow stores artifacts with, and an HTTP one must answer. None: the server chooses."""
    if not configured:
        local = default_artifact_root(uri)
        return None if local is None else _writable_folder(local)
    scheme = urlparse(configured).scheme
    if scheme in ("", "file"):
        return _writable_folder(Path(urlparse(configured).path if scheme else configured).expanduser().resolve())
    if scheme not in artifact_schemes():
        raise TrackingError(f"mlflow.artifact_root: MLflow stores no artifacts at {scheme}:// (it knows "
                            f"{', '.join(sorted(artifact_schemes()))}, or a local folder)")
    if scheme in ("http", "https") and (problem := unanswered(configured, PROBE_SECONDS)) is not None:
        raise TrackingError(f"mlflow.artifact_root: {configured} {problem}")
    return configured


def artifact_schemes() -> set[str]:
    """The URI schemes MLflow has an artifact repository for (s3, gs, wasbs, hdfs, sftp, mlflow-artifacts, ...)."""
    from mlflow.store.artifact.artifact_repository_registry import _artifact_repository_registry

    return {scheme for scheme in _artifact_repository_registry._registry if scheme and scheme not in SCHEMES_NOT_ROOTS}


def _writable_folder(root: Path) -> Path:
    """The folder, once a file could be written in it; else one TrackingError naming it."""
    try:
        root.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=root):
            pass
    except OSError as e:
        raise TrackingError(f"mlflow.artifact_root: cannot write {root} ({e.strerror or e})") from None
    return root


def run_tags() -> dict[str, str]:
    """Who is writing the run, so a run left RUNNING by a killed process can be recognised later."""
    return {PID_TAG: str(os.getpid()), HOST_TAG: socket.gethostname()}


def mark_stale_runs(client: MlflowClient, experiment_id: str) -> list[str]:
    """Runs still RUNNING whose process on this host is gone (SIGKILL, OOM) end FAILED, tagged `ragtune.stale`."""
    stale = []
    for run in client.search_runs([experiment_id], filter_string="attributes.status = 'RUNNING'"):
        tags = run.data.tags
        if tags.get(HOST_TAG) != socket.gethostname() or not tags.get(PID_TAG, "").isdigit():
            continue
        if alive(int(tags[PID_TAG])):
            continue
        client.set_tag(run.info.run_id, STALE_TAG, f"process {tags[PID_TAG]} ended without closing the run")
        client.set_terminated(run.info.run_id, status="FAILED")
        stale.append(run.info.run_id)
    if stale:
        print(f"marked {len(stale)} run(s) left RUNNING by a killed process as FAILED ({STALE_TAG})", file=sys.stderr)
    return stale


def flatten(value: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(value, Mapping):
        for key, item in value.items():
            yield from flatten(item, f"{prefix}.{key}" if prefix else str(key))
    else:
        yield prefix, value


def log_config_params(run_id: str, cfg: DictConfig) -> None:
    """The flattened resolved config as params (batched; long values are cut to MLflow's limit)."""
    container = OmegaConf.to_container(cfg, resolve=True)
    params = [Param(key, str(value)[:PARAM_VALUE_LIMIT]) for key, value in flatten(container)]
    client = MlflowClient()
    for start in range(0, len(params), BATCH):
        client.log_batch(run_id, params=params[start : start + BATCH])


def git_commit(cwd: Path = PROJECT_DIR) -> str:
    """HEAD of the project's checkout (not of the folder a user runs from), '-dirty' when tracked files differ."""
    try:
        commit = _git(["rev-parse", "HEAD"], cwd)
        dirty = _git(["status", "--porcelain", "--untracked-files=no"], cwd)
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{commit}-dirty" if dirty else commit


def source_tags() -> dict[str, str]:
    """Our commit tag plus MLflow's own, which the UI shows in its Source column."""
    commit = git_commit()
    return {GIT_COMMIT_TAG: commit, "mlflow.source.git.commit": commit.removesuffix("-dirty")}


def _git(args: list[str], cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()


def experiment_name(cfg: DictConfig) -> str:
    """`mlflow.experiment`, else the dataset's name, else its folder's name: one experiment per data set."""
    if cfg.mlflow.get("experiment"):
        return str(cfg.mlflow.experiment)
    dataset = cfg.dataset
    folder = dataset.get("corpus_dir") or dataset.get("path")
    if dataset.get("name") not in (None, dataset.get("kind")) or not folder:
        return str(dataset.get("name") or dataset.get("kind"))
    return Path(os.path.realpath(str(folder))).name  # as Path.resolve, but a symlink loop is left to the loader
