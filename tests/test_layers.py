"""Imports point one way: components <- pipelines <- experiments <- serving <- entry points (run.py, serve.py).

Every import statement is read, also those inside functions. The few that still point up are listed by name, to
be removed (issue 27 moves what they import down); the list must shrink, never grow.
"""

import ast
from pathlib import Path

import networkx

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("components", "pipelines", "experiments", "serving")
# Known upward imports (module -> package it imports from), left from before the layering was enforced.
KNOWN_UPWARD: set[tuple[str, str]] = set()
# The import paths that models promoted before serving/ existed store in their code (tests/fixtures).
SHIMS = {"experiments.promoted", "experiments.request_schema"}


def imported_names(path: Path) -> set[str]:
    """Every module a file imports, and for `from a import b` also `a.b` (b may be a module)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    return names


def imported_packages(path: Path) -> set[str]:
    return {name.split(".")[0] for name in imported_names(path)}


def modules() -> dict[str, Path]:
    return {
        ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): path
        for layer in LAYERS
        for path in (ROOT / layer).rglob("*.py")
    }


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


def test_no_modules_import_each_other():
    """A cycle hidden in a function-level import still ties two modules into one: none is allowed."""
    graph = networkx.DiGraph()
    found = modules()
    for module, path in found.items():
        graph.add_edges_from((module, name) for name in imported_names(path) if name in found and name != module)
    assert list(networkx.simple_cycles(graph)) == []


def test_the_shims_only_re_export():
    for shim in SHIMS:
        path = ROOT / Path(*shim.split(".")).with_suffix(".py")
        assert imported_packages(path) - {"sys"} <= {"serving", "experiments"}, shim
        assert path.read_text(encoding="utf-8").count("\n") <= 12, f"{shim} is more than a shim"


def test_the_shims_are_exactly_the_modules_an_old_model_imports():
    stored = imported_names(ROOT / "tests" / "fixtures" / "model_promoted_before_serving_package" / "promoted_model.py")
    assert {name for name in stored if name.startswith("experiments.") and name.count(".") == 1} == SHIMS


def test_experiments_keeps_its_groups_and_nothing_else_at_the_top():
    top = {path.stem for path in (ROOT / "experiments").glob("*.py")} - {"__init__"}
    assert {f"experiments.{name}" for name in top} == SHIMS
    assert {path.name for path in (ROOT / "experiments").iterdir() if path.is_dir() and path.name != "__pycache__"} == {
        "datasets", "evaluation", "runs", "comparison", "tuning"}


def test_tests_share_helpers_only_through_tests_support():
    """A test module imported by another runs its tests twice and hides what it shares: helpers live in support/."""
    for path in (ROOT / "tests").rglob("*.py"):
        shared = {n for n in imported_names(path) if n.startswith("tests.") and not n.startswith("tests.support")}
        assert shared == set(), path.relative_to(ROOT)


def test_components_are_grouped_as_haystack_groups_its_own():
    assert [path.name for path in (ROOT / "components").glob("*.py")] == ["__init__.py"]


def test_component_tests_sit_in_their_components_group():
    assert [path.name for path in (ROOT / "tests" / "components").glob("*.py")] == ["__init__.py"]
    groups = {path.name for path in (ROOT / "components").iterdir() if (path / "__init__.py").exists()}
    assert {path.name for path in (ROOT / "tests" / "components").iterdir() if path.is_dir()} - {"__pycache__"} <= groups



LAYOUT = ROOT / "pipelines" / "run_layout.py"
# Where tag names could be written: the layers, the benchmarks, the scripts, the sweeper plugin, the entry points.
TAGGING = (*LAYERS, "benchmarks", "scripts", "hydra_plugins")
ENTRY_POINTS = ("run.py", "serve.py")


def tag_literals(path: Path) -> list[tuple[int, str]]:
    """The strings of a file that begin like a ragtune tag (`"ragtune.x"`, an f-string's first part too), with
    their lines; a logger's name (`logging.getLogger("ragtune.serve")`) is no tag."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    logger_names = {
        id(arg)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) == "getLogger"
        for arg in node.args
    }
    return sorted(
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("ragtune.")
        and id(node) not in logger_names
    )


def test_the_tag_scan_tells_tags_from_logger_names(tmp_path: Path):
    source = tmp_path / "module.py"
    source.write_text('import logging\nlog = logging.getLogger("ragtune.serve")\nother = getLogger("ragtune.x")\n'
                      'tags = {"ragtune.error": "x", f"ragtune.{1}.tokenizer": "y"}\n', encoding="utf-8")
    assert tag_literals(source) == [(4, "ragtune."), (4, "ragtune.error")]


def test_no_ragtune_tag_name_is_spelled_outside_the_run_layout():
    """Runs already logged are read by these names: one module spells them (pipelines/run_layout.py)."""
    files = [ROOT / name for name in ENTRY_POINTS] + [path for top in TAGGING for path in (ROOT / top).rglob("*.py")]
    assert LAYOUT in files and tag_literals(LAYOUT)
    found = [f"{path.relative_to(ROOT)}:{line}: {text}" for path in files if path != LAYOUT
             for line, text in tag_literals(path)]
    assert found == []


def test_one_class_per_name():
    """Two classes of one name (two ServedPipelines, two QueryRequests once) make a reader guess which is meant."""
    where: dict[str, list[str]] = {}
    for module, path in modules().items():
        if module in SHIMS:
            continue
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef):
                where.setdefault(node.name, []).append(module)
    assert {name: places for name, places in where.items() if len(places) > 1} == {}
