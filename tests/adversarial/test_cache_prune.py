"""Issue 42: `ragtune cache` against a mistyped --cache-dir, through the real CLI and real files.

Prune removes only what ragtune wrote (a snapshot or a killed build's temp folder bearing its marker, or a
snapshot with ragtune's manifest); a user's folder, a look-alike temp folder, someone else's manifest and any
symlink are listed as "not ours" and left alone, their checksum unchanged. Bad paths and values end in one line,
exit 2.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from haystack.document_stores.in_memory import InMemoryDocumentStore

from experiments.runs.config import compose
from pipelines.errors import UserError
from pipelines.index import build_index, ingest_spec
from pipelines.index.locking import remove_stale
from pipelines.index.snapshot import LAST_USED, MANIFEST, save_snapshot
from tests.support.cli import as_nobody, last_line, ragtune
from tests.support.ingest_corpus import DOCS
from tests.support.snapshots import CHUNKS, dead_pid
from tests.support.user_folder import checksum, make_user_folder

DAY = 24 * 3600
NOT_OURS = "a folder without ragtune's marker or manifest"


def snapshot(cache_dir: Path, name: str, used_days_ago: float = 40) -> Path:
    """A real snapshot, last used `used_days_ago` days back."""
    save_snapshot(CHUNKS, cache_dir / name, {"fingerprint": name})
    used = time.time() - used_days_ago * DAY
    (cache_dir / name / LAST_USED).touch()
    os.utime(cache_dir / name / LAST_USED, (used, used))
    return cache_dir / name


def test_prune_leaves_a_users_folder_in_the_cache_alone(tmp_path, capsys):
    """The issue's repro: `mkdir -p X/thesis; ragtune cache --cache-dir X prune --older-than 1d` removed thesis."""
    make_user_folder(tmp_path / "thesis")
    before = checksum(tmp_path / "thesis")
    snapshot(tmp_path, "fp-old")
    assert ragtune("cache", "--cache-dir", str(tmp_path), "prune", "--older-than", "1d") == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("removed fp-old  ")
    assert out[1:] == [f"not ours: thesis ({NOT_OURS}); prune leaves it alone", "freed 0.0 MiB in 1 folder(s)"]
    assert checksum(tmp_path / "thesis") == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["thesis"]


@pytest.mark.parametrize("dry_run", [[], ["--dry-run"]])
def test_a_cache_dir_that_is_a_users_folder_loses_nothing(tmp_path, capsys, dry_run):
    """A mistyped `--cache-dir .` or `~`: every entry is the user's, nothing is removed."""
    home = make_user_folder(tmp_path / "home")
    before = checksum(home)
    assert ragtune("cache", "--cache-dir", str(home), "prune", "--keep-last", "0", "--older-than", "1s", *dry_run) == 0
    assert capsys.readouterr().out.splitlines() == [
        "not ours: notes.txt (a file); prune leaves it alone",
        f"not ours: thesis ({NOT_OURS}); prune leaves it alone",
        f"{'would free' if dry_run else 'freed'} 0.0 MiB in 0 folder(s)",
    ]
    assert checksum(home) == before


def test_symlinks_are_never_followed_nor_removed(tmp_path, capsys):
    home = make_user_folder(tmp_path / "home")
    before = checksum(home)
    cache_dir = tmp_path / "cache"
    cache_dir.mkdir()
    (cache_dir / "to-folder").symlink_to(home / "thesis", target_is_directory=True)
    (cache_dir / "to-file").symlink_to(home / "notes.txt")
    (cache_dir / "to-snapshot").symlink_to(snapshot(tmp_path, "elsewhere"), target_is_directory=True)
    links = checksum(cache_dir)
    assert ragtune("cache", "--cache-dir", str(cache_dir), "prune", "--keep-last", "0", "--older-than", "1s") == 0
    assert capsys.readouterr().out.splitlines() == [
        "not ours: to-file (a symbolic link); prune leaves it alone",
        "not ours: to-folder (a symbolic link); prune leaves it alone",
        "not ours: to-snapshot (a symbolic link); prune leaves it alone",
        "freed 0.0 MiB in 0 folder(s)",
    ]
    assert checksum(home) == before and checksum(cache_dir) == links
    assert (tmp_path / "elsewhere" / MANIFEST).is_file()


def test_only_ragtunes_temp_folders_count_as_a_killed_builds_debris(tmp_path, capsys):
    """A hidden folder named like a temp folder is the user's unless it bears the marker save_snapshot writes first."""
    pid = dead_pid()
    look_alike = make_user_folder(tmp_path / f".thesis-{pid}-abcd1234")
    before = checksum(look_alike)
    debris = tmp_path / f".fp-{pid}-efgh5678"
    debris.mkdir()
    (debris / ".ragtune-index").touch()  # as save_snapshot's first write leaves it
    assert ragtune("cache", "--cache-dir", str(tmp_path), "prune", "--keep-last", "0") == 0
    assert capsys.readouterr().out.splitlines() == [
        f"removed {debris.name}  0.0 MiB  (left by a killed build)",
        "freed 0.0 MiB in 1 folder(s)",
    ]
    assert checksum(look_alike) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [look_alike.name]


def test_someone_elses_manifest_is_not_ours_but_a_damaged_snapshot_with_the_marker_is(tmp_path, capsys):
    foreign = make_user_folder(tmp_path / "webapp")
    (foreign / MANIFEST).write_text(json.dumps({"name": "webapp", "icons": []}))  # a web app manifest
    before = checksum(foreign)
    damaged = snapshot(tmp_path, "fp-damaged")
    (damaged / MANIFEST).write_text("{not json")
    assert ragtune("cache", "--cache-dir", str(tmp_path), "list") == 0
    rows = capsys.readouterr().out.splitlines()
    assert rows[1].startswith("fp-damaged") and rows[1].split()[2] == "damaged"
    assert rows[2:] == ["1 snapshot(s), 0.0 MiB", f"not ours: webapp ({NOT_OURS}); prune leaves it alone"]
    assert ragtune("cache", "--cache-dir", str(tmp_path), "prune", "--keep-last", "0") == 0
    assert capsys.readouterr().out.splitlines()[0].startswith("removed fp-damaged  ")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["webapp"]
    assert checksum(foreign) == before


def test_a_snapshot_written_before_the_marker_is_still_ours(tmp_path, capsys):
    old = snapshot(tmp_path, "fp-v2")
    (old / ".ragtune-index").unlink(missing_ok=True)  # the manifest alone (format and fingerprint) says ragtune wrote it
    assert ragtune("cache", "--cache-dir", str(tmp_path), "prune", "--keep-last", "0") == 0
    assert capsys.readouterr().out.splitlines()[0].startswith("removed fp-v2  ")
    assert not old.exists()


@pytest.mark.parametrize("kind", ["missing", "file"])
@pytest.mark.parametrize("command", [["list"], ["prune", "--keep-last", "1"]])
def test_a_cache_dir_that_is_no_folder_is_named_in_one_line(tmp_path, capsys, kind, command):
    path = tmp_path / "nowhere"
    if kind == "file":
        path.write_text("a user's file\n")
    assert ragtune("cache", "--cache-dir", str(path), *command) == 2
    out, err = capsys.readouterr()
    why = "no such folder" if kind == "missing" else "not a folder"
    assert out == "" and err == f"ragtune cache: error: --cache-dir {path}: {why}\n"
    assert kind == "missing" or path.read_text() == "a user's file\n"


def test_a_duration_too_long_for_a_timedelta_is_one_line(tmp_path, capsys):
    assert ragtune("cache", "--cache-dir", str(tmp_path), "prune", "--older-than", "99999999999d") == 2
    assert last_line(capsys.readouterr().err) == (
        "ragtune cache prune: error: argument --older-than: '99999999999d' is longer than a timedelta can hold"
    )


def test_an_unreadable_folder_in_the_cache_is_one_line(shared_tmp):
    """`ragtune cache --cache-dir /` as a user meets /root: a folder it may not read (real permissions, not root)."""
    (shared_tmp / "private").mkdir(mode=0o000)
    for command in (["list"], ["prune", "--keep-last", "0"]):
        result = as_nobody("cache", "--cache-dir", str(shared_tmp), *command, cwd=shared_tmp)
        assert (result.returncode, result.stdout) == (2, "")
        assert result.stderr == (f"ragtune cache: error: --cache-dir {shared_tmp}: cannot access "
                                 f"{shared_tmp / 'private' / '.ragtune-index'} (Permission denied)\n")
    assert (shared_tmp / "private").is_dir()


@pytest.mark.parametrize("with_manifest", [False, True])
def test_a_build_never_deletes_a_users_folder_that_stands_where_its_snapshot_goes(tmp_path, with_manifest):
    """A damaged snapshot, or debris without a manifest, is discarded before the rebuild: only if ragtune wrote it."""
    cfg = compose(["ingest=fixed", "ingest.chunk_size=120", "ingest.chunk_overlap=0"])
    spec = ingest_spec(cfg.ingest, cfg.models.embedder.document)
    mine = make_user_folder(tmp_path / "cache" / "fp")
    if with_manifest:  # someone else's manifest.json: loading it fails as a damaged snapshot would
        (mine / MANIFEST).write_text('{"their": "tool"}')
    before = checksum(mine)
    with pytest.raises(UserError, match=r"was not written by ragtune .* stands where index fp goes; move it out of"):
        build_index(DOCS, spec, InMemoryDocumentStore(), tmp_path / "cache", "fp")
    assert checksum(mine) == before


@pytest.mark.parametrize("kind", ["file", "symlink"])
def test_a_build_never_deletes_a_users_file_that_stands_where_its_lock_goes(tmp_path, kind):
    """The lock file is unlinked on release: a user's file (or link) at its name is refused, never locked or removed."""
    cfg = compose(["ingest=fixed", "ingest.chunk_size=120", "ingest.chunk_overlap=0"])
    spec = ingest_spec(cfg.ingest, cfg.models.embedder.document)
    home = make_user_folder(tmp_path / "home")
    cache = tmp_path / "cache"
    cache.mkdir()
    lock = cache / ".fp.lock"
    if kind == "file":
        lock.write_text("my notes\n")
    else:
        lock.symlink_to(home / "notes.txt")
    before = (checksum(home), lock.is_symlink(), lock.read_text())
    with pytest.raises(UserError, match=r"index cache: .*\.fp\.lock (is a symlink|holds data).* move it out of"):
        build_index(DOCS, spec, InMemoryDocumentStore(), cache, "fp")
    remove_stale(cache)  # the next build's sweep leaves it too
    assert (checksum(home), lock.is_symlink(), lock.read_text()) == before
