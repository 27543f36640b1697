"""Builds across processes: one builder per fingerprint, and what a killed build leaves is cleared."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from haystack.document_stores.in_memory import InMemoryDocumentStore

from pipelines.index import build_index
from pipelines.index.locking import build_lock, remove_stale
from pipelines.index.snapshot import MARKER
from tests.support.index_builds import clean_build, fast_spec, wait_for
from tests.support.ingest_corpus import DOCS, chunk_records
from tests.support.paths import ROOT
from tests.support.snapshots import dead_pid

# A child process that builds index "fp" in argv[2] from the spec in argv[1] and reports to argv[3].
CHILD = """
import json, sys
from pathlib import Path
from haystack.document_stores.in_memory import InMemoryDocumentStore
from pipelines.index import build_index
from tests.support.ingest_corpus import DOCS, chunk_records

spec, cache, report = json.loads(Path(sys.argv[1]).read_text()), Path(sys.argv[2]), Path(sys.argv[3])
(report.parent / f"ready-{report.name}").touch()
store = InMemoryDocumentStore()
info = build_index(DOCS, spec, store, cache, "fp")
report.write_text(json.dumps({"cache_hit": info.cache_hit, "chunks": chunk_records(store)}))
"""

# The same child, stopped inside save_snapshot's np.save so that a SIGKILL leaves a half-written temp folder.
STALLED_CHILD = """
import sys, time
import numpy
from pathlib import Path

def stalled_save(*args, **kwargs):
    Path(sys.argv[3]).touch()
    time.sleep(600)

numpy.save = stalled_save
""" + CHILD


def start_child(code, spec_file, cache, report):
    return subprocess.Popen(
        [sys.executable, "-c", code, str(spec_file), str(cache), str(report)], cwd=ROOT, env=os.environ | {"PYTHONPATH": str(ROOT)}
    )


@pytest.mark.slow
def test_two_processes_racing_a_cold_build_build_once(tmp_path):
    gate, cache = tmp_path / "gate", tmp_path / "cache"
    gate.mkdir()
    spec = fast_spec(gate)
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps(spec))
    children = [start_child(CHILD, spec_file, cache, gate / f"report{i}") for i in range(2)]
    wait_for(lambda: len(list(gate.glob("ready-*"))) == 2 and len(list(gate.glob("building-*"))) == 1, "one builder")
    time.sleep(1.0)  # the other child is now blocked on the fingerprint's lock
    (gate / "release").touch()
    assert [child.wait(timeout=120) for child in children] == [0, 0]
    reports = [json.loads((gate / f"report{i}").read_text()) for i in range(2)]
    assert sorted(r["cache_hit"] for r in reports) == [False, True]
    assert len(list(gate.glob("building-*"))) == 1
    assert reports[0]["chunks"] == reports[1]["chunks"] == clean_build(tmp_path, spec)
    assert sorted(p.name for p in cache.iterdir()) == ["fp"]


@pytest.mark.slow
def test_a_build_killed_mid_snapshot_leaves_nothing_the_next_build_keeps(tmp_path):
    cache, stalled = tmp_path / "cache", tmp_path / "stalled"
    spec = fast_spec()
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps(spec))
    child = start_child(STALLED_CHILD, spec_file, cache, stalled)
    wait_for(stalled.exists, "the child to stall in save_snapshot")
    temp = [p.name for p in cache.glob(f".fp-{child.pid}-*")]
    assert len(temp) == 1 and (cache / temp[0] / "chunks.jsonl").exists()
    assert (cache / ".fp.lock").exists()
    child.send_signal(signal.SIGKILL)
    assert child.wait(timeout=30) == -signal.SIGKILL

    store = InMemoryDocumentStore()
    info = build_index(DOCS, spec, store, cache, "fp")
    assert (info.cache_hit, info.rebuilt_reason) == (False, None)
    assert sorted(p.name for p in cache.iterdir()) == ["fp"]
    assert chunk_records(store) == clean_build(tmp_path, spec)


def test_stale_debris_is_removed_and_live_work_is_not(tmp_path):
    hours_ago = time.time() - 7 * 3600
    for name in (f".a-{dead_pid()}-abcd1234", f".b-{os.getpid()}-abcd1234", f".c-{os.getpid()}-abcd1234", ".d-abcd1234"):
        (tmp_path / name).mkdir()
        (tmp_path / name / MARKER).touch()  # save_snapshot's first write
    os.utime(tmp_path / f".c-{os.getpid()}-abcd1234", (hours_ago, hours_ago))
    (tmp_path / ".free.lock").touch()
    with build_lock(tmp_path, "held") as held:
        assert held
        remove_stale(tmp_path)
        assert sorted(p.name for p in tmp_path.iterdir()) == [f".b-{os.getpid()}-abcd1234", ".d-abcd1234", ".held.lock"]
        with build_lock(tmp_path, "held", blocking=False) as second:
            assert not second
    assert sorted(p.name for p in tmp_path.iterdir()) == [f".b-{os.getpid()}-abcd1234", ".d-abcd1234"]
