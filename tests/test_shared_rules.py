"""Rules the whole tree shares have one definition each: the Han class, the cache root and the seeded order.

A second copy of a rule drifts from the first (the Han range was defined five times, only one copy with CJK
Extension B+; `ragtune doc-sets build` ignored $RAGTUNE_CACHE while paths.cache honoured it), so the copies
themselves are what these checks forbid.
"""

import hashlib
import re
from pathlib import Path

import pytest

from components.common.paths import cache_root
from components.tools.sql_query import SqlQuery
from experiments.datasets.base import seeded_rank
from tests.support.paths import ROOT
from tests.support.shipped import composed

# A bound of a Han range, written as an escape (\u4e00, \U00020000, 0x4e00) or as the character before a dash.
HAN_BOUND = re.compile(
    r"\\u(?:3400|4dbf|4e00|9fa5|9fff|f900|faff)|\\U0002[0-9a-f]{4}|0x(?:3400|4e00|9fff)|[\u3400\u4e00]-",
    re.IGNORECASE,
)
# Working the cache root out again: reading $RAGTUNE_CACHE, or spelling its default as a string.
CACHE_ROOT_COPY = re.compile(r"""environ(?:\.get\(|\[)\s*["']RAGTUNE_CACHE|["']\.cache/ragtune""")
RUNTIME = ("components", "pipelines", "experiments", "serving", "scripts", "benchmarks")


def sources(*tops: str) -> list[Path]:
    return [path for top in tops for path in sorted((ROOT / top).rglob("*.py"))] + [ROOT / "run.py", ROOT / "serve.py"]


def test_the_han_class_is_defined_once():
    found = {path.relative_to(ROOT).as_posix(): len(HAN_BOUND.findall(path.read_text(encoding="utf-8")))
             for path in sources(*RUNTIME, "tests")
             if path != Path(__file__).resolve()}
    assert found.pop("components/common/text.py") > 0  # the check does see the one definition
    assert {path: count for path, count in found.items() if count} == {}, "use components.common.words.HAN"


def test_the_cache_root_is_worked_out_once():
    copies = [path.relative_to(ROOT).as_posix() for path in sources(*RUNTIME)
              if CACHE_ROOT_COPY.search(path.read_text(encoding="utf-8"))]
    assert copies == ["components/common/paths.py"], "use components.common.paths.cache_root()"


@pytest.mark.parametrize("env", [None, "/data/rt", "relative/cache"])
def test_cache_root_is_the_configs_paths_cache(monkeypatch, env):
    if env is None:
        monkeypatch.delenv("RAGTUNE_CACHE", raising=False)
    else:
        monkeypatch.setenv("RAGTUNE_CACHE", env)
    assert cache_root() == Path(composed().paths.cache) == Path(env or ".cache/ragtune")


def test_the_sql_tool_keeps_its_databases_under_the_cache_root(monkeypatch, tmp_path):
    monkeypatch.setenv("RAGTUNE_CACHE", str(tmp_path))
    assert SqlQuery(database="tables.sql").cache_dir == str(tmp_path / "sql")
    assert SqlQuery(database="tables.sql", cache_dir="elsewhere").cache_dir == "elsewhere"


def test_seeded_rank_is_the_sha256_of_seed_and_key():
    """The holdout split, the generated test set and the doc sets' query sample all sort by it: any change to it
    moves every dataset fingerprint."""
    assert seeded_rank(0, "q-1") == hashlib.sha256(b"0:q-1").hexdigest()
    assert seeded_rank("python_faq-en", "faq/x.txt") == hashlib.sha256(b"python_faq-en:faq/x.txt").hexdigest()
