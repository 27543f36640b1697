"""One MLflow parent run per Hydra sweep; every job of the sweep becomes its child.

The launcher process opens the parent run before the jobs start (sweep_parent_run.py) and writes its id into the sweep
folder, where each job (in this process or a joblib worker) finds it. When the sweep ends, the finished children are compared on the
parent (table, bar chart, paired tests against the baseline), the failed ones are named there, and the parent is
closed: FAILED only when no child finished.
"""

from __future__ import annotations

import json
import shlex
import sys
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import mlflow
from mlflow.entities import Run
from mlflow.tracking import MlflowClient
from omegaconf import DictConfig, OmegaConf

from experiments.runs.config import CONFIG_GROUPS
from pipelines.run_layout import (
    ERROR_ARTIFACT,
    ERROR_TAG,
    FAILED_JOBS_TAG,
    FAILURES_FILE,
    JOB_NUM_TAG,
    OVERRIDES_TAG,
    PARENT_FILE,
)

BASELINE_KEY = "compare.baseline"  # '+compare.baseline="pipeline=bm25"' (quoted: Hydra) picks the child with it
_failed_labels: list[str] = []


@dataclass(frozen=True)
class ParentRun:
    run_id: str
    experiment_id: str
    tracking_uri: str = ""
    swept: tuple[str, ...] = ()  # the override keys the sweep varies: what a job's run name shows


@dataclass(frozen=True)
class BaselineChoice:
    run: Run
    note: str
    fallback: bool


def read_parent_run(sweep_dir: str | Path) -> ParentRun | None:
    """The sweep's parent run; its children log into the parent's experiment so the sweep stays one group."""
    path = Path(sweep_dir) / PARENT_FILE
    if not path.exists():
        return None
    fields = json.loads(path.read_text())
    return ParentRun(**fields | {"swept": tuple(fields.get("swept", ()))})


def job_tags(job_num: int | None, overrides: Sequence[str]) -> dict[str, str]:
    """What a sweep reads back from a child: its place in override order (None outside a sweep) and overrides."""
    return {OVERRIDES_TAG: shlex.join(overrides)} | ({JOB_NUM_TAG: str(job_num)} if job_num is not None else {})


def run_overrides(run: Run) -> list[str]:
    return shlex.split(run.data.tags.get(OVERRIDES_TAG, ""))


def child_runs(client: MlflowClient, parent_run_id: str) -> list[Run]:
    """In override order (Hydra's job number), never in the order the jobs happened to finish."""
    experiment_id = client.get_run(parent_run_id).info.experiment_id
    runs = client.search_runs([experiment_id], filter_string=f"tags.mlflow.parentRunId = '{parent_run_id}'")
    return sorted(runs, key=_job_order)


def _job_order(run: Run) -> tuple[float, int]:
    num = run.data.tags.get(JOB_NUM_TAG, "")
    return (int(num) if num.isdigit() else float("inf"), run.info.start_time)


def short_labels(overrides_per_run: list[list[str]]) -> list[str]:
    """Each run named by the overrides that differ between the runs: `bm25`, `hybrid top_k=5`.

    Config group choices show their value alone, other keys their shortest distinct dotted tail,
    paths their shortest distinct tail. A single run is named by all its overrides; a run left at the defaults
    of every differing key is `defaults`.
    """
    parsed = [dict(override_key_value(o) for o in overrides) for overrides in overrides_per_run]
    keys = list(dict.fromkeys(key for run in parsed for key in run))
    swept = [k for k in keys if len(parsed) == 1 or len({run.get(k) for run in parsed}) > 1]
    short_keys = _distinct_tails(swept, ".")
    values = {k: _distinct_tails([run[k] for run in parsed if k in run], "/") for k in swept}
    return [" ".join(_shown(k, short_keys[k], values[k][run[k]]) for k in swept if k in run) or "defaults" for run in parsed]


def override_key_value(override: str) -> tuple[str, str]:
    key, _, value = override.partition("=")
    return key.lstrip("+~"), value


def _shown(key: str, short_key: str, value: str) -> str:
    """A config group choice reads best as its value alone: `bm25`, not `pipeline=bm25`."""
    return value if "/" in key or key in CONFIG_GROUPS else f"{short_key}={value}"


def _distinct_tails(items: Sequence[str], sep: str) -> dict[str, str]:
    """Each item's shortest `sep`-separated tail that no other item shares; URLs are left whole."""
    parts = {item: item.rstrip(sep).split(sep) for item in items if "://" not in item}
    tails = {item: item for item in items}
    for item, own in parts.items():
        for n in range(1, len(own) + 1):
            tail = sep.join(own[-n:])
            if not any(sep.join(other[-n:]) == tail for name, other in parts.items() if name != item):
                tails[item] = tail
                break
    return tails


def run_labels(runs: Sequence[Run]) -> list[str]:
    """Short labels from the runs' overrides; runs logged without them keep their name and id."""
    if not all(OVERRIDES_TAG in run.data.tags for run in runs):
        return [f"{run.info.run_name} ({run.info.run_id[:6]})" for run in runs]
    labels = short_labels([run_overrides(run) for run in runs])
    return [
        f"{label} ({run.info.run_id[:6]})" if labels.count(label) > 1 else label
        for label, run in zip(labels, runs, strict=True)
    ]


def pick_baseline(children: Sequence[Run], requested: str | None) -> BaselineChoice | None:
    """The child whose overrides include `requested` (e.g. `pipeline=bm25`), else the first finished in override order.

    None when no child finished.
    """
    finished = [run for run in children if run.info.status == "FINISHED"]
    if not finished:
        return None
    labels = dict(zip((run.info.run_id for run in children), run_labels(children), strict=True))
    first = finished[0]
    if not requested:
        return BaselineChoice(first, f"baseline: {labels[first.info.run_id]} (the first finished job in override order)", False)
    wanted = {override_key_value(o) for o in shlex.split(requested)}
    matches = [run for run in children if wanted <= {override_key_value(o) for o in run_overrides(run)}]
    chosen = next((run for run in matches if run.info.status == "FINISHED"), None)
    if chosen is not None:
        return BaselineChoice(chosen, f"baseline: {labels[chosen.info.run_id]} ({BASELINE_KEY}={requested})", False)
    if matches:
        why = f"that job failed ({_error(matches[0])})"
    else:
        why = f"no job of the sweep has that override (jobs: {', '.join(labels.values())})"
    note = f"{BASELINE_KEY}={requested}: {why}; baseline is the first finished job instead: {labels[first.info.run_id]}"
    return BaselineChoice(first, note, True)


def failed_children(children: Sequence[Run]) -> list[tuple[str, Run]]:
    """The children that did not finish, with their labels."""
    labelled = zip(run_labels(children), children, strict=True)
    return [(label, run) for label, run in labelled if run.info.status != "FINISHED"]


def failure_summary(children: Sequence[Run]) -> str:
    """One line per child that did not finish, with its label and error; empty when every child finished."""
    lines = [f"  {label}: {_error(run)} (run {run.info.run_id})" for label, run in failed_children(children)]
    return f"{len(lines)} of {len(children)} sweep jobs failed:\n" + "\n".join(lines) if lines else ""


def _error(run: Run) -> str:
    return run.data.tags.get(ERROR_TAG) or f"no error recorded, run {run.info.status}"


def failed_jobs() -> list[str]:
    """Labels of the jobs that failed in the sweep this process ran, for run.py's exit status."""
    return list(_failed_labels)


def record_failed_job(parent: ParentRun, run_name: str, tags: Mapping[str, str], error: BaseException) -> str:
    """A FAILED child for a job that failed before its run opened, so the sweep's summary names it.

    When the job's run was opened after all (a child with the same tags[JOB_NUM_TAG]), that run's id is returned.
    """
    if parent.tracking_uri:
        mlflow.set_tracking_uri(parent.tracking_uri)
    client = MlflowClient()
    recorded = _child_of_job(client, parent.run_id, tags.get(JOB_NUM_TAG))
    if recorded is not None:
        return recorded.info.run_id
    error_tag = {ERROR_TAG: f"{type(error).__name__}: {error}"[:5000], "mlflow.parentRunId": parent.run_id}
    run_id = client.create_run(parent.experiment_id, run_name=run_name, tags={**tags, **error_tag}).info.run_id
    client.log_text(run_id, "".join(traceback.format_exception(error)), ERROR_ARTIFACT)
    client.set_terminated(run_id, status="FAILED")
    return run_id


def _child_of_job(client: MlflowClient, parent_run_id: str, job_num: str | None) -> Run | None:
    if job_num is None:
        return None
    return next((r for r in child_runs(client, parent_run_id) if r.data.tags.get(JOB_NUM_TAG) == job_num), None)


def report_failures(
    client: MlflowClient, parent_run_id: str, children: Sequence[Run], search: bool = False
) -> None:
    """Printed last and kept on the parent (tag + failed_jobs.txt): a sweep that went on past a bad point says so.

    In a `search` (an Optuna study with a finished trial) a failed trial is part of the search: named, but the
    process still exits 0."""
    _failed_labels[:] = [] if search else [label for label, _ in failed_children(children)]
    client.set_tag(parent_run_id, FAILED_JOBS_TAG, str(len(_failed_labels)))
    summary = failure_summary(children)
    if summary:
        print(summary, file=sys.stderr)
        client.log_text(parent_run_id, summary + "\n", FAILURES_FILE)


def swept_keys(config: DictConfig) -> tuple[str, ...]:
    """Keys of the sweep overrides (`a=1,2`, `range(...)`, `choice(...)`), as Hydra itself parses them."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = OverridesParser.create().parse_overrides(list(config.hydra.overrides.task))
    searched = tuple(OmegaConf.select(config, "hydra.sweeper.params") or ())  # an Optuna search's own space
    return tuple(dict.fromkeys([*(o.key_or_group for o in parsed if o.is_sweep_override()), *searched]))
