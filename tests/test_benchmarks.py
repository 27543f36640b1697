"""Every benchmark script imports as part of the `benchmarks` package, without a sys.path hack, and builds its
command line: `python -m benchmarks.NAME --help` works for each. Importing one must stay cheap (no models)."""

import importlib
import subprocess
import sys

import pytest

from tests.support.paths import ROOT

HELPERS = {"__init__", "common"}  # the package and its shared helpers, not scripts
SCRIPTS = sorted(path.stem for path in (ROOT / "benchmarks").glob("*.py") if path.stem not in HELPERS)


def test_there_are_scripts_to_check():
    assert len(SCRIPTS) >= 15


@pytest.mark.parametrize("name", SCRIPTS)
def test_each_script_imports_and_answers_help(name, capsys):
    module = importlib.import_module(f"benchmarks.{name}")
    assert callable(module.main)
    with pytest.raises(SystemExit) as exited:
        module.main(["--help"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.startswith("usage: ")


@pytest.mark.parametrize("name", SCRIPTS)
def test_no_script_edits_sys_path_or_silences_late_imports(name):
    text = (ROOT / "benchmarks" / f"{name}.py").read_text(encoding="utf-8")
    assert "sys.path" not in text
    assert "E402" not in text


def test_a_script_runs_as_a_module_from_the_repository_root():
    done = subprocess.run([sys.executable, "-m", "benchmarks.bench_first_run", "--help"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "python -m benchmarks.bench_first_run" in done.stdout
