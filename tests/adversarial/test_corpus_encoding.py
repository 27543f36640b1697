"""Issue 42, section 5: corpus files whose encoding is guessed, not known, must not become questions in mojibake.

Under `dataset.encoding=auto` a file that is not UTF-8 is decoded with the charset charset_normalizer detects only
when the detection is confident: a Latin-1 French file (which reads about as well as cp1252, cp1250 or cp1257) and a
file of UTF-8 and GBK bytes together are skipped, each with its reason, in the skipped list the loaders return and
`ragtune testset` prints; naming the codec reads the file. UTF-8, GBK-only Chinese and UTF-16 files still read, and
the shipped demo corpus loses no file.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from experiments.datasets.demo import DEMO_DIR
from experiments.datasets.local import load_corpus
from pipelines.conversion import AUTO_ENCODING
from tests.support.cli import ragtune

FRENCH = ("Congés payés. Le congé annuel est de vingt-cinq jours ouvrés par année civile. Les employés à temps "
          "partiel bénéficient d'un congé proportionnel à leur durée de travail. Déposez votre demande au moins "
          "deux semaines à l'avance, auprès du service des ressources humaines.\n")
CHINESE = "差旅标准。员工出差住宿标准为一线城市每晚不超过600元。年假为十五天，需提前两周申请。\n"
ENGLISH = "Leave policy. Full-time employees accrue 20 days of paid annual leave per calendar year.\n"


def write_corpus(corpus: Path) -> Path:
    """One file per case: mojibake-prone ones (Latin-1 French, UTF-8 and GBK mixed) beside ones that must read."""
    corpus.mkdir()
    (corpus / "french.txt").write_bytes(FRENCH.encode("latin-1"))
    # A UTF-8 line pasted into a GBK file: charset_normalizer calls the whole file gb18030, turning the line into
    # mojibake such as 鍛樺伐鍑哄樊.
    (corpus / "mixed.txt").write_bytes("员工出差住宿标准为一线城市每晚不超过\n".encode() + (CHINESE * 20).encode("gbk"))
    (corpus / "english.txt").write_text(ENGLISH, encoding="utf-8")
    (corpus / "gbk.txt").write_bytes((CHINESE * 3).encode("gbk"))
    (corpus / "utf16.md").write_bytes((ENGLISH + CHINESE).encode("utf-16"))
    return corpus


def test_a_low_confidence_decode_is_skipped_with_its_reason(tmp_path):
    documents, skipped = load_corpus(write_corpus(tmp_path / "corpus"), "**/*", None, AUTO_ENCODING)
    assert {doc.id: doc.content for doc in documents} == {
        "english.txt": ENGLISH.strip(),
        "gbk.txt": (CHINESE * 3).strip(),
        "utf16.md": (ENGLISH + CHINESE).strip(),
    }
    assert sorted(skipped) == ["french.txt", "mixed.txt"]
    assert re.fullmatch(  # the detector's order of the candidates is its own (here cp1250 before cp1252)
        r"not utf-8 text \(invalid continuation byte: byte 0xe9 at offset 4\), and its encoding is uncertain: it reads "
        r"as cp125\d but also, differently, as cp125\d(, \w+)*; set dataset.encoding to the file's codec "
        r"\(e.g. latin-1, cp1252, gbk\) to read it",
        skipped["french.txt"],
    )
    assert skipped["mixed.txt"] == (
        "not utf-8 text (invalid start byte: byte 0xb2 at offset 55), yet bytes 0-53 are UTF-8: mixed encodings, which "
        "gb18030 would turn into wrong characters; re-save the file as UTF-8, or set dataset.encoding to the file's "
        "codec (e.g. latin-1, cp1252, gbk) to read it"
    )


def test_a_named_encoding_reads_the_file(tmp_path):
    documents, skipped = load_corpus(write_corpus(tmp_path / "corpus"), "french.txt", None, "latin-1")
    assert (documents[0].content, documents[0].meta["encoding"], skipped) == (FRENCH.strip(), "iso8859-1", {})


def test_testset_reports_the_skipped_files_and_asks_nothing_of_them(tmp_path, capsys):
    corpus = write_corpus(tmp_path / "corpus")
    out = tmp_path / "golden.jsonl"
    assert ragtune("testset", "dataset=local", f"dataset.corpus_dir={corpus}", "--out", str(out)) == 0
    err = capsys.readouterr().err.splitlines()
    assert [line.split(":")[0] for line in err if line.startswith("skipped ")] == ["skipped french.txt",
                                                                                  "skipped mixed.txt"]
    sources = {json.loads(line).get("source") for line in out.read_text(encoding="utf-8").splitlines()}
    assert sources and not sources & {"french.txt", "mixed.txt"}


@pytest.mark.parametrize("subset", ["en", "zh"])
def test_the_demo_corpus_loses_no_file(subset):
    corpus = DEMO_DIR / "corpus" / subset
    documents, skipped = load_corpus(corpus, "**/*", None, AUTO_ENCODING)
    assert skipped == {}
    assert len(documents) == sum(1 for path in corpus.rglob("*") if path.is_file())
