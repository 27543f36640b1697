"""Promote a run: gate it, log it as an MLflow model with its index snapshot, register it and move an alias.

    ragtune promote RUN_ID --name NAME [--alias production] [--force] [--max-regression 0.05]
    ragtune promote --name NAME --alias production --version N      # move the alias back (rollback)

The candidate is gated (experiments.comparison.gate) against the run behind the alias; a regression, or a
candidate that answered another data set (corpus or golden set) than that run, refuses the promotion unless
--force, which is recorded on the version (tag ragtune.gate_override; ragtune.dataset_changed names both
sets). A candidate (or a rollback target) that would let anyone see a document the version behind the alias
hid from them is refused too: access fields dropped, a different meta file, a document public or wider where
it was scoped (pipelines/access.py). Only --allow-wider-access overrides that, recorded on the version (tag
ragtune.access_widened). The model is a pyfunc (serving/pyfunc_model.py, models-from-code) whose one artifact
is the run's bundle (serving/bundle.py): portable config, index snapshot, project files and model identities.
The version's tags link back to the run, its sweep parent, the git commit and the dataset and index
fingerprints; its description holds the gate verdict and each check passed over. A run chosen on the dev part
of its golden set (dataset.holdout.use=dev: an Optuna study's trial) is refused unless its sweep also ran its
configuration on the test part (--no-test-split promotes it anyway, recorded on the version: tag
ragtune.test_split_waived). Serve it with `ragtune serve model=models:/NAME@production` or
`mlflow models serve -m models:/NAME@production --env-manager local`.

Exit 0: promoted (or the alias moved); 1: the gate, the access check or the test-part check refused; 2: the
run or version cannot be promoted, or the gate cannot judge (runs of different data sets, no shared headline
metric), said in one line.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import mlflow
from mlflow.entities import Run
from mlflow.entities.model_registry import ModelVersion
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from experiments.comparison.gate import (
    EXIT_OK,
    EXIT_REGRESSED,
    EXIT_UNJUDGEABLE,
    HOLDOUT_PARAM,
    GateResult,
    gate_runs,
    regression_limit,
)
from experiments.runs.sweep import child_runs, run_overrides
from experiments.runs.tracking import TRACKING_HELP, connect
from pipelines.access import IndexAccess
from pipelines.errors import UserError
from pipelines.run_layout import (
    ACCESS_FILE,
    ACCESS_WIDENED_TAG,
    DATASET_CHANGED_TAG,
    GATE_OVERRIDE_TAG,
    GATE_TAG,
    LINEAGE,
    SOURCE_RUN_TAG,
    STUDY_PART_TAG,
    TEST_SPLIT_WAIVED_TAG,
)
from serving.bundle import CONFIG, IDENTITIES, INDEX, PromotionError, snapshot_access, write_bundle
from serving.bundle_compat import RawBundle, upgrade

MODEL_FILE = Path(__file__).with_name("pyfunc_model.py")
MODEL_NAME = "ragtune"  # the logged model's name inside its run


def pip_requirements(model_packages: Sequence[str]) -> list[str]:
    """This project's pinned dependencies, plus the pip packages its models came from (`name==version`)."""
    pinned = [r for r in importlib.metadata.requires("ragtune") or [] if "extra ==" not in r]
    names = {r.split("==")[0].lower() for r in pinned}
    return pinned + [p for p in model_packages if "==" in p and p.split("==")[0].lower() not in names]


def current_version(client: MlflowClient, name: str, alias: str) -> ModelVersion | None:
    try:
        return client.get_model_version_by_alias(name, alias)
    except MlflowException:
        return None


def gate_against_alias(client: MlflowClient, run: Run, name: str, alias: str, max_regression: float) -> GateResult | None:
    """The gate's verdict on `run` against the run behind `name@alias`; None when the alias points nowhere yet."""
    behind = current_version(client, name, alias)
    if behind is None:
        return None
    baseline = behind.tags.get(SOURCE_RUN_TAG) or behind.run_id
    return gate_runs(client, client.get_run(baseline), run, max_regression)


def version_access(name: str, version: ModelVersion) -> IndexAccess:
    """Who may see what under a registered version: its bundle's access.json, as the current bundle format has
    it (serving/bundle_compat.py)."""
    bundle = f"models:/{name}/{version.version}/artifacts/bundle"

    def fetched(relative: str) -> Path:
        return Path(mlflow.artifacts.download_artifacts(artifact_uri=f"{bundle}/{relative}"))

    def from_snapshot() -> IndexAccess:
        try:
            return snapshot_access(fetched(f"{INDEX}/{identities['index_fingerprint']}/chunks.jsonl").parent)
        except (MlflowException, OSError):
            raise PromotionError(f"{name} version {version.version} records no access.json and no index chunks: "
                                 "who may see what under it is unknown; --allow-wider-access promotes anyway") from None

    identities = json.loads(fetched(IDENTITIES).read_text(encoding="utf-8"))
    try:
        access: IndexAccess | None = IndexAccess.read(fetched(ACCESS_FILE))
    except (MlflowException, OSError):
        access = None
    raw = RawBundle(bundle, identities, fetched(CONFIG).read_text(encoding="utf-8"), access, from_snapshot)
    return upgrade(raw).access


def widening(client: MlflowClient, name: str, alias: str, candidate: IndexAccess) -> list[str]:
    """Why `candidate` would widen access over the version behind `name@alias`; empty when it would not."""
    behind = current_version(client, name, alias)
    return [] if behind is None else candidate.widened_from(version_access(name, behind))


def refuse_wider(name: str, alias: str, reasons: list[str]) -> int:
    print(f"promote: refused: it would widen access over {name}@{alias}: {'; '.join(reasons)} "
          "(--allow-wider-access promotes anyway, recorded on the version)", file=sys.stderr)
    return EXIT_REGRESSED




def untested_on_test(client: MlflowClient, run: Run) -> str | None:
    """Why a run chosen on the dev part of its golden set (a search's trial) may not be promoted: its sweep holds no
    finished test-part run of the same configuration, or it is a trial of a study that held out no test part.
    None when it may; the advice is the caller's."""
    if run.data.tags.get(STUDY_PART_TAG) == "all":
        return (f"run {run.info.run_id} was chosen by a search over every question of its golden set "
                "(hydra.sweeper.holdout=false): no test part checked it")
    if run.data.params.get(HOLDOUT_PARAM) != "dev":
        return None
    mine = sorted(o for o in run_overrides(run) if not o.startswith(f"{HOLDOUT_PARAM}="))
    parent = run.data.tags.get("mlflow.parentRunId")
    for sibling in child_runs(client, parent) if parent else []:
        if (sibling.data.params.get(HOLDOUT_PARAM) == "test" and sibling.info.status == "FINISHED"
                and sorted(o for o in run_overrides(sibling) if not o.startswith(f"{HOLDOUT_PARAM}=")) == mine):
            return None
    return (f"run {run.info.run_id} was chosen on the dev part of its golden set ({HOLDOUT_PARAM}=dev), and no "
            "finished run of the same configuration on the test part is in its sweep")


def promote(client: MlflowClient, run_id: str, name: str, alias: str, max_regression: float, force: bool,
            allow_wider: bool = False, test_split: bool = True) -> int:
    run = client.get_run(run_id)
    if run.info.status != "FINISHED":
        raise PromotionError(f"run {run_id} is {run.info.status}: only a finished run can be promoted")
    untested = untested_on_test(client, run)
    if untested is not None and test_split:
        print(f"promote: refused: {untested}: run one with {HOLDOUT_PARAM}=test (an Optuna study with "
              "hydra.sweeper.holdout=true runs its Pareto front there), or pass --no-test-split",
              file=sys.stderr)
        return EXIT_REGRESSED
    verdict = gate_against_alias(client, run, name, alias, max_regression)
    description = f"gate against {name}@{alias}: " + (
        "nothing to gate against (first version)" if verdict is None else verdict.summary()
    )
    refused = verdict is not None and verdict.exit_code != EXIT_OK
    if verdict is not None and verdict.lines():
        print("\n".join(verdict.lines()))
        description += "\n" + "\n".join(verdict.lines())
    if refused and not force:
        print(f"promote: refused: {verdict.summary()} (--force promotes anyway, recorded on the version)",
              file=sys.stderr)
        return verdict.exit_code
    # The checks passed over, by flag: recorded on the version (its tags and description) and printed.
    overrides = {"--force": verdict.summary()} if refused else {}
    overrides |= {"--no-test-split": untested} if untested is not None else {}
    description += "".join(f"\n{flag}: {why}" for flag, why in overrides.items())
    with tempfile.TemporaryDirectory(prefix="ragtune-bundle-") as tmp:
        bundle = Path(tmp) / "bundle"
        identities = write_bundle(client, run, bundle)
        access = IndexAccess.read(bundle / ACCESS_FILE)
        wider = widening(client, name, alias, access)
        if wider and not allow_wider:
            return refuse_wider(name, alias, wider)
        with mlflow.start_run(run_id=run_id):
            info = mlflow.pyfunc.log_model(
                name=MODEL_NAME,
                python_model=str(MODEL_FILE),
                artifacts={"bundle": str(bundle)},
                pip_requirements=pip_requirements(list(identities["models"].values())),
                registered_model_name=name,
            )
    version = str(info.registered_model_version)
    gate = "forced" if refused else "passed" if verdict else "first version"
    tags = {SOURCE_RUN_TAG: run_id, GATE_TAG: gate}
    tags |= {ours: run.data.tags[theirs] for theirs, ours in LINEAGE.items() if theirs in run.data.tags}
    tags |= access.tags()
    if refused:
        tags[GATE_OVERRIDE_TAG] = "true"
        if verdict.other_data is not None:
            tags[DATASET_CHANGED_TAG] = verdict.other_data
    if untested is not None:
        tags[TEST_SPLIT_WAIVED_TAG] = untested
    if wider:
        tags[ACCESS_WIDENED_TAG] = "; ".join(wider)[:5000]
    for key, value in tags.items():
        client.set_model_version_tag(name, version, key, value)
    client.update_model_version(name, version, description=description)
    client.set_registered_model_alias(name, alias, version)
    print(f"promote: {name} version {version} (run {run_id}) is now {name}@{alias}; {description.splitlines()[0]}")
    print(f"promote: its index is {access.summary()}" + (" (access widened, allowed)" if wider else ""))
    for flag, why in overrides.items():
        print(f"promote: {flag} recorded on the version: {why}")
    return EXIT_OK


def move_alias(client: MlflowClient, name: str, alias: str, version: str, allow_wider: bool = False) -> int:
    target = client.get_model_version(name, version)  # raises on an unknown version
    before = current_version(client, name, alias)
    wider = [] if before is None else version_access(name, target).widened_from(version_access(name, before))
    if wider and not allow_wider:
        return refuse_wider(name, alias, wider)
    if wider:
        client.set_model_version_tag(name, target.version, ACCESS_WIDENED_TAG, "; ".join(wider)[:5000])
    client.set_registered_model_alias(name, alias, target.version)
    was = f"version {before.version}" if before else "nothing"
    source = target.tags.get(SOURCE_RUN_TAG)
    print(f"promote: {name}@{alias} moved from {was} to version {target.version} (run {source})")
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_id", nargs="?", help="the MLflow run to promote (omit with --version)")
    parser.add_argument("--name", required=True, help="registered model name")
    parser.add_argument("--alias", default="production")
    parser.add_argument("--version", help="move the alias to this existing version instead (rollback)")
    parser.add_argument("--force", action="store_true",
                        help="promote even past a regression, or runs that answered other data sets")
    parser.add_argument("--allow-wider-access", action="store_true",
                        help="promote even when someone would see documents the current version hid from them")
    parser.add_argument("--max-regression", type=regression_limit, default=0.05,
                        help="the gate's largest tolerated regression (a finite number >= 0)")
    parser.add_argument("--no-test-split", action="store_true",
                        help="promote a run chosen on a dev part although no test-part run checked it")
    parser.add_argument("--tracking-uri", help=TRACKING_HELP)
    args = parser.parse_args(argv)
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # three tiny downloads, three bars
    if (args.run_id is None) == (args.version is None):
        parser.error("give a RUN_ID to promote, or --version N to move the alias, not both")
    try:
        connect(args.tracking_uri, key="--tracking-uri")
        client = MlflowClient()
        if args.version is not None:
            return move_alias(client, args.name, args.alias, args.version, args.allow_wider_access)
        return promote(client, args.run_id, args.name, args.alias, args.max_regression, args.force,
                       args.allow_wider_access, test_split=not args.no_test_split)
    except (MlflowException, UserError) as e:
        print(f"promote: {e}", file=sys.stderr)
        return EXIT_UNJUDGEABLE


if __name__ == "__main__":
    sys.exit(main())
