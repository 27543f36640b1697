"""Issue 42: `ragtune doc-sets build` through the real CLI, from a real (small, locally built) Debian package.

A rebuild never loses the previous set (it is built beside and swapped in), a folder of a user's files is refused
unless --force, and a bad --out, --deb or --max-queries is one line, exit 2, before any work.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from experiments.datasets.doc_sets import builder
from tests.support.cli import as_nobody, last_line, ragtune
from tests.support.user_folder import checksum, make_user_folder

SET = "python_faq-en"
QUESTIONS = 12


def faq_page() -> str:
    """A Sphinx FAQ page with QUESTIONS question headings, each over a body long enough to be kept."""
    sections = "".join(
        f'<section id="q{i}"><h3>How do I solve problem number {i} with Python?</h3>'
        f"<p>{' '.join(f'answer{i}word{j}' for j in range(40))}</p></section>"
        for i in range(QUESTIONS)
    )
    return f'<html><body><div role="main"><h1>Programming FAQ</h1>{sections}</div></body></html>'


@pytest.fixture(scope="module")
def deb(tmp_path_factory) -> Path:
    """python3.11-doc as the set expects it, holding one FAQ page, built with dpkg-deb (no network)."""
    if shutil.which("dpkg-deb") is None:
        pytest.skip("dpkg-deb is missing: building doc sets needs a Debian/Ubuntu system")
    tree = tmp_path_factory.mktemp("package")
    faq = tree / "usr/share/doc/python3.11/html/faq"
    faq.mkdir(parents=True)
    (faq / "programming.html").write_text(faq_page(), encoding="utf-8")
    (tree / "DEBIAN").mkdir()
    (tree / "DEBIAN/control").write_text(
        "Package: python3.11-doc\nVersion: 1.0\nArchitecture: all\nMaintainer: Test <test@example.org>\n"
        "Description: a test package\n",
        encoding="utf-8",
    )
    deb = tree.parent / "python3.11-doc_1.0_all.deb"
    subprocess.run(["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", str(tree), str(deb)], check=True,
                   capture_output=True)
    deb.chmod(0o644)
    return deb


def build(deb: Path, out: Path, *extra: str) -> int:
    return ragtune("doc-sets", "build", SET, "--deb", str(deb), "--out", str(out), *extra)


def test_an_interrupted_rebuild_keeps_the_previous_set_and_leaves_no_temp_folder(deb, tmp_path, capsys, monkeypatch):
    out = tmp_path / "sets" / SET
    assert build(deb, out) == 0
    before = checksum(out)

    def interrupted(*args: object) -> str:  # Ctrl-C while the last file of the rebuild is written
        raise KeyboardInterrupt

    monkeypatch.setattr(builder, "readme_text", interrupted)
    assert build(deb, out) == 130
    assert checksum(out) == before
    assert [p.name for p in out.parent.iterdir()] == [SET]
    monkeypatch.undo()
    assert build(deb, out) == 0  # a set ragtune wrote is rebuilt without --force
    assert [p.name for p in out.parent.iterdir()] == [SET]
    assert capsys.readouterr().out.startswith(f"{SET}: python3.11-doc 1.0: {QUESTIONS} documents")


def test_a_folder_of_a_users_files_is_refused_unless_force(deb, tmp_path, capsys):
    home = make_user_folder(tmp_path / "home")
    before = checksum(home)
    assert build(deb, home) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == (f"ragtune doc-sets: error: {home} holds files that ragtune did not write; name a "
                                 "new or empty folder, or pass --force to replace it\n")
    assert checksum(home) == before
    assert build(deb, home, "--force") == 0
    assert sorted(p.name for p in home.iterdir()) == [".ragtune-doc-set", "README.md", "SOURCE.json", "corpus",
                                                      "golden.jsonl"]


def test_out_that_is_a_file_or_under_one_is_one_line_before_any_work(deb, tmp_path, capsys):
    notes = make_user_folder(tmp_path / "home") / "notes.txt"
    before = checksum(tmp_path / "home")
    assert build(deb, notes) == 2
    assert capsys.readouterr().err == f"ragtune doc-sets: error: {notes} is a file, not a folder\n"
    assert build(deb, notes / "set") == 2
    assert capsys.readouterr().err == (f"ragtune doc-sets: error: cannot write {notes / 'set'}: {notes} is a file, "
                                       "not a folder\n")
    assert checksum(tmp_path / "home") == before


def test_out_in_a_read_only_folder_is_one_line_before_any_work(deb, shared_tmp):
    """Real permissions, so as an unprivileged user: root writes anywhere."""
    locked = shared_tmp / "locked"
    locked.mkdir(mode=0o555)
    readable = shutil.copy(deb, shared_tmp / deb.name)
    result = as_nobody("doc-sets", "build", SET, "--deb", str(readable), "--out", str(locked / SET), cwd=shared_tmp)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (f"ragtune doc-sets: error: cannot write {locked / SET}: {locked} is not writable "
                             "(Permission denied)\n")


def test_a_deb_that_is_missing_a_folder_or_no_package_is_one_line(tmp_path, capsys):
    not_a_package = tmp_path / "notes.deb"
    not_a_package.write_text("just text\n")
    for deb, line in (
        (tmp_path / "missing.deb", f"ragtune doc-sets build: error: argument --deb: no such file: {tmp_path / 'missing.deb'}"),
        (tmp_path, f"ragtune doc-sets build: error: argument --deb: {tmp_path} is not a file (a .deb package)"),
        (not_a_package, f"ragtune doc-sets: error: --deb {not_a_package}: not a Debian package (dpkg-deb: error: "
                        f"'{not_a_package}' is not a Debian format archive)"),
    ):
        assert build(deb, tmp_path / "out") == 2
        assert last_line(capsys.readouterr().err) == line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("value", ["-1", "0"])
def test_max_queries_below_one_is_refused(deb, tmp_path, capsys, value):
    assert build(deb, tmp_path / "out", f"--max-queries={value}") == 2
    assert last_line(capsys.readouterr().err) == (
        f"ragtune doc-sets build: error: argument --max-queries: expected a whole number >= 1, got {value!r}"
    )
    assert not (tmp_path / "out").exists()


def test_max_queries_caps_the_queries(deb, tmp_path, capsys):
    assert build(deb, tmp_path / "out", "--max-queries", "5") == 0
    golden = (tmp_path / "out" / "golden.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(golden) == 5


def test_without_out_the_set_goes_under_ragtune_cache(deb, tmp_path, capsys, monkeypatch):
    """The default folder follows $RAGTUNE_CACHE as `paths.cache` does, so `dataset.corpus_dir` finds it there."""
    cache = tmp_path / "elsewhere"
    monkeypatch.setenv("RAGTUNE_CACHE", str(cache))
    monkeypatch.chdir(tmp_path)
    assert ragtune("doc-sets", "build", SET, "--deb", str(deb)) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first == (f"{SET}: python3.11-doc 1.0: {QUESTIONS} documents, {QUESTIONS} queries "
                     f"(all {QUESTIONS} candidate queries) -> {cache / 'doc_sets' / SET}")
    assert (cache / "doc_sets" / SET / "golden.jsonl").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["elsewhere"]  # nothing under ./.cache/ragtune
