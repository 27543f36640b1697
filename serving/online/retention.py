"""`ragtune traces prune model=models:/NAME@production [serve.trace.retention_days=30]`: deletes the served
model's traces older than serve.trace.retention_days, for cron.

It takes serve's own overrides (conf/serve.yaml), so it prunes the very experiment `ragtune serve` writes to, and
only that one, through MLflow's API.
"""

from __future__ import annotations

import argparse
import time

import mlflow

from pipelines.errors import UserError
from serving.online.traces import experiment_name
from serving.serve_command import model_uri
from serving.settings import compose_serve, serve_settings

DAY_MS = 86_400_000


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="Deletes a served model's traces older than its retention (cron).")
    commands = parser.add_subparsers(dest="command", required=True)
    prune = commands.add_parser("prune", help="delete the served model's traces past serve.trace.retention_days")
    prune.add_argument("overrides", nargs="*", help="serve's overrides: model=models:/NAME@ALIAS (or run=RUN_ID), ...")
    args = parser.parse_args(argv)
    from experiments.runs.tracking import connect

    cfg = compose_serve(args.overrides)
    serve = serve_settings(cfg)
    connect(cfg.mlflow.tracking_uri)
    name = experiment_name(model_uri(cfg.model, cfg.run), serve.trace_experiment)
    found = mlflow.MlflowClient().get_experiment_by_name(name)
    if found is None:
        raise UserError(f"experiment {name!r} does not exist: no traces of this model were recorded")
    days = serve.trace.retention_days
    deleted = mlflow.MlflowClient().delete_traces(
        found.experiment_id, max_timestamp_millis=int(time.time() * 1000) - days * DAY_MS
    )
    print(f"traces prune: deleted {deleted} traces older than {days} days from experiment {name!r}")
    return 0
