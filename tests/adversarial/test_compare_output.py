"""Issue 42: `ragtune compare RUN RUN` wrote comparison.png and paired_*.csv/png into the current folder
without naming them (a user's own comparison.png overwritten, untracked files in a checkout), and its help
named an option `--out-dir` that does not exist. Run through the real CLI against a real MLflow store."""

import re

import pytest

from experiments.runs.config import PROJECT_DIR
from serving import cli
from tests.support.mlflow_runs import logged_run, questions
from tests.support.user_folder import checksum, make_user_folder


def test_compare_writes_into_a_named_ignored_folder_and_prints_every_path(tmp_path, capsys, monkeypatch,
                                                                          mlflow_store):
    uri, client, experiment = mlflow_store
    baseline = logged_run(client, experiment, "a", questions(10, f1=0.6, recall=0.9), tmp_path)
    candidate = logged_run(client, experiment, "b", questions(10, f1=0.7, recall=0.9), tmp_path)
    here = make_user_folder(tmp_path / "checkout")
    (here / "comparison.png").write_bytes(b"the user's own chart")
    before = checksum(here)
    monkeypatch.chdir(here)

    assert cli.main(["compare", baseline, candidate, "--tracking-uri", uri]) == 0
    printed = re.findall(r"(?:wrote| and) (outputs/\S+?\.(?:png|csv))", capsys.readouterr().out)
    written = {path.relative_to(here).as_posix() for path in (here / "outputs").rglob("*") if path.is_file()}
    assert written == set(printed)
    paired = f"paired_{candidate[:8]}_vs_{baseline[:8]}"
    names = {path.rsplit("/", 1)[1] for path in written}
    assert names == {"comparison.png", f"{paired}.csv", f"{paired}.png"}
    assert all(path.startswith(f"outputs/compare/{baseline[:8]}-{candidate[:8]}-") for path in written)
    assert "outputs/" in (PROJECT_DIR / ".gitignore").read_text().splitlines()  # git-ignored in a checkout

    (here / "outputs").rename(tmp_path / "written")  # what compare wrote; the rest is the user's, untouched
    assert checksum(here) == before


def test_compare_help_names_its_out_option_and_default(capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["compare", "--help"])
    help_text = capsys.readouterr().out
    assert exit_.value.code == 0
    assert "--out-dir" not in help_text and "--out OUT" in help_text
    assert "outputs/compare/<short run ids>-<time>/comparison.png" in " ".join(help_text.split())
