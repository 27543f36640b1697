"""Issue 42, section 5: `ragtune testset` through the real CLI on small corpora written here, and a symlink loop as
`dataset.corpus_dir` of a run.

A bad --out (an existing file without --force, a folder, a path under a file, a read-only folder), a share or size
out of range, an LLM endpoint without its key or unreachable, and a corpus_dir that is a symlink loop each end in one
line, exit 2, before any work; a refused --out leaves a user's folder as it was. Locating evidence in a long
document walks it a bounded number of times (it used to count spaces from the start for every span), with the
spans a straightforward reference finds.
"""

from __future__ import annotations

import json
import random
import socket
from pathlib import Path

import pytest
from haystack import Document

from experiments.datasets.base import DatasetError
from experiments.datasets.golden import evidence
from experiments.datasets.golden.evidence import locate_each
from experiments.datasets.golden.items import GoldenItem
from experiments.runs.runner import run_job
from tests.support.cli import as_nobody, last_line, ragtune
from tests.support.run_py import job_config, write_local_dataset
from tests.support.user_folder import checksum, make_user_folder

WRITTEN = "ragtune testset: error: "


def run_testset(tmp_path: Path, *argv: str) -> int:
    """`ragtune testset` on the small corpus of tests/support/run_py.py, written under `tmp_path` once."""
    if not (tmp_path / "corpus").exists():
        write_local_dataset(tmp_path)
    return ragtune("testset", "dataset=local", f"dataset.corpus_dir={tmp_path / 'corpus'}",
                   f"paths.cache={tmp_path / 'cache'}", *argv)


def free_port() -> int:
    """A loopback port nothing listens on (bound, then let go)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


# --- --out -----------------------------------------------------------------------------------------------------


def test_an_existing_out_file_is_kept_unless_force(tmp_path, capsys):
    user = make_user_folder(tmp_path / "home")
    before = checksum(user)
    assert run_testset(tmp_path, "--out", str(user / "notes.txt")) == 2
    assert capsys.readouterr().err == f"{WRITTEN}{user / 'notes.txt'} exists; pass --force to overwrite it\n"
    assert checksum(user) == before

    assert run_testset(tmp_path, "--out", str(user / "notes.txt"), "--force") == 0
    lines = (user / "notes.txt").read_text(encoding="utf-8").splitlines()
    assert lines and all(json.loads(line)["id"].startswith("gen-") for line in lines)
    assert sorted(p.name for p in user.iterdir()) == ["notes.txt", "thesis"]  # no temporary file left beside it


@pytest.mark.parametrize(
    ("target", "line"),
    [
        ("thesis", "{home}/thesis is a folder; name a file to write"),
        ("notes.txt/golden.jsonl", "cannot write {home}/notes.txt/golden.jsonl: {home}/notes.txt is a file, not a folder"),
        ("notes.txt/deeper/golden.jsonl",
         "cannot write {home}/notes.txt/deeper/golden.jsonl: {home}/notes.txt is a file, not a folder"),
    ],
)
def test_an_out_that_cannot_be_a_file_is_one_line_before_any_work(tmp_path, capsys, target, line):
    """Refused before the corpus is read: the corpus folder here does not even exist."""
    user = make_user_folder(tmp_path / "home")
    before = checksum(user)
    code = ragtune("testset", "dataset=local", f"dataset.corpus_dir={tmp_path / 'missing'}", "--out", str(user / target))
    assert code == 2
    assert capsys.readouterr().err == WRITTEN + line.format(home=user) + "\n"
    assert checksum(user) == before


def test_an_out_in_a_read_only_folder_is_one_line_before_any_work(shared_tmp):
    """Real permissions, so as an unprivileged user: root writes anywhere."""
    locked = shared_tmp / "locked"
    locked.mkdir(mode=0o555)
    result = as_nobody("testset", "dataset=local", f"dataset.corpus_dir={shared_tmp / 'missing'}",
                       "--out", str(locked / "golden.jsonl"), cwd=shared_tmp)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (f"{WRITTEN}cannot write {locked / 'golden.jsonl'}: {locked} is not writable "
                             "(Permission denied)\n")


def test_a_failed_write_leaves_the_old_file_and_no_half_file(tmp_path):
    """A write that stops midway (here a character UTF-8 cannot hold, after a line that can) changes nothing."""
    from experiments.datasets.testset import write_atomically

    user = make_user_folder(tmp_path / "home")
    before = checksum(user)
    with pytest.raises(UnicodeEncodeError):
        write_atomically(user / "notes.txt", '{"id": "gen-0001"}\n' * 1000 + "\ud800")
    assert checksum(user) == before


# --- arguments -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["--unanswerable", "1.0"], "--unanswerable must be in [0, 1), got 1.0"),
        (["--unanswerable", "2"], "--unanswerable must be in [0, 1), got 2.0"),
        (["--unanswerable", "-0.1"], "--unanswerable must be in [0, 1), got -0.1"),
        (["--unanswerable", "nan"], "--unanswerable must be in [0, 1), got nan"),
        (["--size", "0"], "--size must be at least 1, got 0"),
        (["--size", "-5"], "--size must be at least 1, got -5"),
        (["--passages", "0"], "--passages must be at least 1, got 0"),
        (["--max-copied", "-1"], "--max-copied must be at least 0, got -1"),
    ],
)
def test_a_share_or_size_out_of_range_is_one_line(tmp_path, capsys, argv, line):
    assert run_testset(tmp_path, "--out", str(tmp_path / "out.jsonl"), *argv) == 2
    assert last_line(capsys.readouterr().err) == f"ragtune testset: error: {line}"
    assert not (tmp_path / "out.jsonl").exists()


def test_no_unanswerable_question_is_a_valid_share(tmp_path):
    assert run_testset(tmp_path, "--out", str(tmp_path / "out.jsonl"), "--unanswerable", "0") == 0
    items = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text(encoding="utf-8").splitlines()]
    assert items and all(item["answerable"] for item in items)


def test_an_llm_endpoint_without_its_key_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    code = run_testset(tmp_path, "models=openai_compatible", "--generator", "llm", "--out", str(tmp_path / "g.jsonl"))
    assert code == 2
    assert capsys.readouterr().err == (
        f"{WRITTEN}models.chat.endpoint.api_key_env: environment variable OPENAI_API_KEY is not set; export it "
        "(any value for servers without auth, e.g. Ollama or vLLM)\n"
    )


def test_an_unreachable_llm_endpoint_is_one_line(tmp_path, capsys):
    url = f"http://127.0.0.1:{free_port()}/v1"
    code = run_testset(tmp_path, "models=openai_compatible", f"models.generator.base_url={url}",
                   "models.generator.api_key_env=HOME", "--generator", "llm", "--out", str(tmp_path / "g.jsonl"))
    assert code == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1
    assert err.startswith(f"{WRITTEN}models.chat.endpoint.base_url: LLM endpoint {url} is unreachable (ConnectError")
    assert not (tmp_path / "g.jsonl").exists()


# --- a symlink loop as dataset.corpus_dir ----------------------------------------------------------------------


def test_a_symlink_loop_as_corpus_dir_is_named_by_testset(tmp_path, capsys):
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    code = ragtune("testset", "dataset=local", f"dataset.corpus_dir={tmp_path / 'loop'}", "--out", str(tmp_path / "g"))
    assert code == 2
    assert capsys.readouterr().err == (
        f"{WRITTEN}dataset.corpus_dir: {tmp_path / 'loop'} is a symlink loop (its links lead back to themselves)\n"
    )


def test_a_symlink_loop_as_corpus_dir_fails_the_run_before_work(tmp_path):
    """What run.py runs, in process; run.py prints a UserError as one line, exit 2 (tests/experiments/test_run.py)."""
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    overrides = write_local_dataset(tmp_path)[:1] + [f"dataset.corpus_dir={tmp_path / 'a'}",
                                                     f"dataset.golden={tmp_path / 'golden.jsonl'}"]
    with pytest.raises(DatasetError, match=r"^dataset.corpus_dir: .*/a is a symlink loop"):
        run_job(job_config(tmp_path, *overrides), tmp_path / "job")
    assert not (tmp_path / "cache" / "index").exists()


# --- locating evidence in a long document ------------------------------------------------------------------------


class WalkedText(str):
    """A normalised text that adds up the characters its searches walk over (count, find, rfind, startswith)."""

    walked = 0

    def _walk(self, start: int | None, end: int | None) -> None:
        WalkedText.walked += len(range(*slice(start, end).indices(len(self))))

    def count(self, sub, start=None, end=None):  # noqa: ANN001, ANN201 (str's own signature)
        self._walk(start, end)
        return super().count(sub, start, end)

    def find(self, sub, start=None, end=None):  # noqa: ANN001, ANN201
        self._walk(start, end)
        return super().find(sub, start, end)

    def rfind(self, sub, start=None, end=None):  # noqa: ANN001, ANN201
        self._walk(start, end)
        return super().rfind(sub, start, end)

    def startswith(self, prefix, start=None, end=None):  # noqa: ANN001, ANN201
        self._walk(start, None if start is None else start + len(prefix))
        return super().startswith(prefix, start, end)


def test_locating_evidence_in_a_5_mb_document_walks_it_a_bounded_number_of_times(monkeypatch):
    """2,000 quotes spread over a 5 MB document: the searches walk about the text once, not once per quote."""
    sentences = [f"Office {i} orders {i % 97} chairs and {i % 13} desks for the floor number {i}.\n" for i in range(72_000)]
    text = "".join(sentences)
    assert len(text) > 5_000_000
    quotes = sentences[::35]
    items = [GoldenItem(id=f"q{i}", question="?", evidence=(q.strip(),), source="big.txt") for i, q in enumerate(quotes)]
    normalise = evidence.normalise_whitespace
    monkeypatch.setattr(evidence, "normalise_whitespace", lambda value: WalkedText(normalise(value)))
    WalkedText.walked = 0
    located = locate_each(items, [Document(id="big.txt", content=text)])
    assert all(located)
    assert WalkedText.walked <= 2 * len(text)  # the old search walked about 2,000 times the text (10 GB)
    first = located[1].evidence_spans[0][0]
    assert text[first.start:first.end] == quotes[1].strip()


def reference_spans(text: str, quote: str) -> list[tuple[int, int]]:
    """Every overlapping match of `quote` in `text` with whitespace runs read as one space, in original offsets:
    the normalised text built character by character, remembering where each character came from."""
    kept: list[tuple[str, int]] = []
    for offset, char in enumerate(text):
        if char.isspace():
            if kept and kept[-1][0] != " ":
                kept.append((" ", offset))
        else:
            kept.append((char, offset))
    while kept and kept[-1][0] == " ":
        kept.pop()
    flat = "".join(char for char, _ in kept)
    return [(kept[i][1], kept[i + len(quote) - 1][1] + 1)
            for i in range(len(flat) - len(quote) + 1) if flat.startswith(quote, i)]


def test_spans_match_a_straightforward_reference_on_small_documents():
    rng = random.Random(7)
    words = ["leave", "days", "20", "annual", "paid", "员工出差", "每晚", "600元", "a", "the", "leave"]
    spaces = [" ", "  ", "\n", "\t ", "\n\n", " \u3000"]
    documents = []
    for d in range(12):
        text = "".join(rng.choice(words) + rng.choice(spaces) for _ in range(rng.randint(5, 60)))
        documents.append(Document(id=f"d{d}.txt", content=rng.choice(["", " \n"]) + text))
    items = []
    for n in range(300):
        doc = rng.choice(documents)
        tokens = evidence.normalise_whitespace(doc.content).split(" ")
        start = rng.randrange(len(tokens))
        quote = " ".join(tokens[start:start + rng.randint(1, 5)])
        cut = rng.randint(0, min(2, len(quote) - 1))  # quotes may start or end inside a word
        quote = quote[cut:len(quote) - rng.randint(0, cut)].strip()
        if not quote:
            continue
        items.append(GoldenItem(id=f"q{n}", question="?", evidence=(quote,), source=rng.choice([doc.id, None])))
    for item, found in zip(items, locate_each(items, documents), strict=True):
        quote = item.evidence[0]
        expected = [(doc.id, start, end) for doc in documents if item.source in (None, doc.id)
                    for start, end in reference_spans(doc.content, quote)]
        assert found is not None, quote
        assert [(s.doc_id, s.start, s.end) for s in found.evidence_spans[0]] == expected, quote


def test_a_corpus_over_a_megabyte_shows_progress_on_stderr(tmp_path, capsys):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    filler = "The handbook goes on here, without a figure or a rule of its own.\n" * 17_000  # no draft in it
    (corpus / "handbook.txt").write_text(
        "Full-time employees accrue 20 days of paid annual leave per calendar year.\n" + filler, encoding="utf-8"
    )
    assert ragtune("testset", "dataset=local", f"dataset.corpus_dir={corpus}", "--out", str(tmp_path / "g.jsonl")) == 0
    err = capsys.readouterr().err
    assert "drafting questions" in err and "filtering drafts" in err
