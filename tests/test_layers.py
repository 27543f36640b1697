"""Imports point one way: components <- pipelines <- experiments <- serving <- entry points (run.py, serve.py).

Every import statement is read, also those inside functions. The few that still point up are listed by name, to
be removed (issue 27 moves what they import down); the list must shrink, never grow.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("components", "pipelines", "experiments", "serving")
# Known upward imports (module -> package it imports from), left from before the layering was enforced.
KNOWN_UPWARD: set[tuple[str, str]] = set()
# `python -m experiments.X` commands and the modules old promoted models import, kept for one release.
SHIMS = {"experiments.promote", "experiments.acl_audit", "experiments.promoted", "experiments.request_schema"}


def imported_packages(path: Path) -> set[str]:
    packages = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            packages |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            packages.add(node.module.split(".")[0])
    return packages


def upward_imports() -> set[tuple[str, str]]:
    found = set()
    for rank, layer in enumerate(LAYERS):
        for path in (ROOT / layer).rglob("*.py"):
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            above = imported_packages(path) & set(LAYERS[rank + 1 :])
            found |= {(module, package) for package in above if module not in SHIMS}
    return found


def test_no_module_imports_from_a_layer_above_its_own():
    found = upward_imports()
    assert found - KNOWN_UPWARD == set(), "new upward imports"
    assert KNOWN_UPWARD - found == set(), "fixed: remove them from KNOWN_UPWARD"


def test_the_shims_only_re_export_from_serving():
    for shim in SHIMS:
        path = ROOT / Path(*shim.split(".")).with_suffix(".py")
        assert imported_packages(path) - {"sys"} == {"serving"}, shim
