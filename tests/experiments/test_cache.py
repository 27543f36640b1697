import json
import os
import time
from datetime import datetime
from pathlib import Path

import pytest
from haystack.document_stores.in_memory import InMemoryDocumentStore

from experiments.runs import cache
from pipelines.index.locking import build_lock
from pipelines.index.snapshot import LAST_USED, MANIFEST, MARKER, load_snapshot, save_snapshot
from tests.support.snapshots import CHUNKS, dead_pid

MIB = 1024 * 1024
DAY = 24 * 3600
def snapshot(cache_dir: Path, name: str, mib: int, used_days_ago: float) -> None:
    """A real snapshot plus a BM25 sub-index of `mib` MiB (the retriever caches one inside), last used back then."""
    save_snapshot(CHUNKS, cache_dir / name, {"fingerprint": name})
    (cache_dir / name / "bm25s-k").mkdir()
    (cache_dir / name / "bm25s-k" / "index.npz").write_bytes(b"\0" * (mib * MIB - _size(cache_dir / name)))
    used = time.time() - used_days_ago * DAY
    (cache_dir / name / LAST_USED).touch()
    os.utime(cache_dir / name / LAST_USED, (used, used))


def _size(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


def stamp(seconds: float) -> str:
    return datetime.fromtimestamp(seconds).strftime("%Y-%m-%d %H:%M")


def created(cache_dir: Path, name: str) -> str:
    return stamp(json.loads((cache_dir / name / MANIFEST).read_text())["created"])


def used(cache_dir: Path, name: str) -> str:
    return stamp((cache_dir / name / LAST_USED).stat().st_mtime)


@pytest.fixture
def cache_dir(tmp_path):
    for name, mib, days in (("new", 1, 0), ("mid", 2, 10), ("old", 3, 40)):
        snapshot(tmp_path, name, mib, days)
    return tmp_path


def run(cache_dir, *args):
    return cache.main(["--cache-dir", str(cache_dir), *args])


def test_list_shows_every_snapshot_most_recently_used_first(cache_dir, capsys):
    (cache_dir / "broken").mkdir()  # a snapshot whose manifest was lost: damaged, still ragtune's by its marker
    (cache_dir / "broken" / MARKER).touch()
    long_ago = time.time() - 50 * DAY
    os.utime(cache_dir / "broken", (long_ago, long_ago))
    (cache_dir / "thesis").mkdir()  # not ragtune's: listed apart
    assert run(cache_dir, "list") == 0
    rows = [
        f"{name:<20}  {mib:>9.1f}  {'3':>7}  {created(cache_dir, name)}  {used(cache_dir, name)}"
        for name, mib in (("new", 1), ("mid", 2), ("old", 3))
    ]
    assert capsys.readouterr().out.splitlines() == [
        f"{'fingerprint':<20}  {'MiB':>9}  {'chunks':>7}  {'created':<16}  last used",
        *rows,
        f"{'broken':<20}  {0:>9.1f}  {'damaged':>7}  {stamp(long_ago)}  {stamp(long_ago)}",
        "4 snapshot(s), 6.0 MiB",
        "not ours: thesis (a folder without ragtune's marker or manifest); prune leaves it alone",
    ]


def test_loading_a_snapshot_records_its_use(cache_dir):
    assert [s.path.name for s in cache.scan(cache_dir)[0]] == ["new", "mid", "old"]
    assert load_snapshot(cache_dir / "old", InMemoryDocumentStore()) == 3
    assert [s.path.name for s in cache.scan(cache_dir)[0]] == ["old", "new", "mid"]


def test_prune_dry_run_removes_nothing(cache_dir, capsys):
    assert run(cache_dir, "prune", "--keep-last", "1", "--dry-run") == 0
    assert capsys.readouterr().out.splitlines() == [
        f"would remove mid  2.0 MiB  (last used {used(cache_dir, 'mid')})",
        f"would remove old  3.0 MiB  (last used {used(cache_dir, 'old')})",
        "would free 5.0 MiB in 2 folder(s)",
    ]
    assert sorted(p.name for p in cache_dir.iterdir()) == ["mid", "new", "old"]


def test_prune_older_than_removes_long_unused_snapshots_and_killed_builds_debris(cache_dir, capsys):
    debris = cache_dir / f".fp-{dead_pid()}-abcd1234"
    debris.mkdir()
    (debris / MARKER).touch()  # save_snapshot's first write
    (debris / "chunks.jsonl").write_bytes(b"\0" * MIB)
    old_used = used(cache_dir, "old")
    assert run(cache_dir, "prune", "--older-than", "30d") == 0
    assert capsys.readouterr().out.splitlines() == [
        f"removed old  3.0 MiB  (last used {old_used})",
        f"removed {debris.name}  1.0 MiB  (left by a killed build)",
        "freed 4.0 MiB in 2 folder(s)",
    ]
    assert sorted(p.name for p in cache_dir.iterdir()) == ["mid", "new"]


def test_prune_keeps_the_newest_and_never_a_snapshot_a_build_holds(cache_dir, capsys):
    old_used = used(cache_dir, "old")
    with build_lock(cache_dir, "mid"):
        assert run(cache_dir, "prune", "--keep-last", "0", "--older-than", "5d") == 0
    assert capsys.readouterr().out.splitlines() == [
        "kept mid: a running build holds its lock",
        f"removed old  3.0 MiB  (last used {old_used})",
        "freed 3.0 MiB in 1 folder(s)",
    ]
    assert sorted(p.name for p in cache_dir.iterdir()) == ["mid", "new"]  # new: used within 5 days


def test_prune_needs_a_rule_and_well_formed_values(cache_dir, capsys):
    for args in (["prune"], ["prune", "--older-than", "3x"], ["prune", "--keep-last", "-1"]):
        with pytest.raises(SystemExit) as exit_info:
            run(cache_dir, *args)
        assert exit_info.value.code == 2
    errors = capsys.readouterr().err
    assert "prune needs --older-than and/or --keep-last" in errors
    assert "argument --older-than: expected a number and a unit s, m, h, d or w (e.g. 30d), got '3x'" in errors
    assert "argument --keep-last: expected a whole number >= 0, got '-1'" in errors
    assert sorted(p.name for p in cache_dir.iterdir()) == ["mid", "new", "old"]


def test_the_default_cache_dir_is_the_configs(monkeypatch):
    monkeypatch.delenv("RAGTUNE_CACHE", raising=False)
    assert cache.default_cache_dir() == Path(".cache/ragtune/index")
    monkeypatch.setenv("RAGTUNE_CACHE", "/data/rt")
    assert cache.default_cache_dir() == Path("/data/rt/index")
