"""The Dataset record plus the config checks and fingerprints every loader shares."""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from haystack import Document

from components.common.text import detect_corpus_language
from experiments.datasets.golden.items import GoldenItem
from pipelines.errors import UserError


class DatasetUnavailableError(UserError, RuntimeError):
    """The data a dataset config names cannot be had here (download failed, file damaged)."""


class DatasetError(UserError, ValueError):
    """A wrong `dataset.*` setting or a malformed dataset file; the message names the key or file:line."""


@dataclass(frozen=True)
class Dataset:
    """Canonical documents plus golden items; the fingerprints key the index cache and the MLflow run.

    `skipped_files` maps each corpus file left out (unreadable, undecodable, unsupported, no text) to the
    reason, so the run can show what the corpus lacks.
    """

    name: str
    language: str
    documents: list[Document]
    golden: list[GoldenItem]
    corpus_fingerprint: str
    golden_fingerprint: str
    fingerprint: str
    source: dict
    skipped_files: dict[str, str] = field(default_factory=dict)


def resolve_path(value: str, key: str, *, is_dir: bool) -> Path:
    """`dataset.<key>` resolved against the cwd (Hydra's original cwd here), checked to exist.

    A symlink loop is named as such: pathlib's checks read it as a missing path."""
    path = Path(value).expanduser()
    path = path if path.is_absolute() else Path.cwd() / path
    try:
        path.stat()
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise DatasetError(f"dataset.{key}: {path} is a symlink loop (its links lead back to themselves)") from None
    if is_dir and not path.is_dir():
        raise DatasetError(f"dataset.{key}: directory not found: {path}")
    if not is_dir and not path.is_file():
        raise DatasetError(f"dataset.{key}: file not found: {path}")
    return path


def seeded_rank(seed: int | str, key: str) -> str:
    """A sort key that orders items the same way on every machine for a seed, whatever order they came in: the
    SHA-256 of `<seed>:<key>` (the holdout split, the generated test set, and the doc sets seeded by their name)."""
    return hashlib.sha256(f"{seed}:{key}".encode()).hexdigest()


def resolve_language(language: str, texts: Sequence[str]) -> str:
    """`dataset.language` as configured, or detected from the corpus when it is "auto"."""
    return language if language != "auto" else detect_corpus_language(texts)


def package_versions(*names: str) -> dict[str, str]:
    """Installed versions of the packages that shaped the canonical text, for the run log."""
    versions = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def _canonical_json(value: Any, what: str) -> bytes:
    """Key-sorted compact JSON: the same bytes in every process (unlike hash())."""
    try:
        return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{what}: not JSON-serialisable, cannot fingerprint it ({exc})") from exc


def corpus_fingerprint(documents: Sequence[Document]) -> str:
    """sha256 over (doc_id, content, meta) sorted by doc_id; changes with any text or metadata edit."""
    digest = hashlib.sha256()
    for doc in sorted(documents, key=lambda d: d.id):
        digest.update(_canonical_json([doc.id, doc.content, doc.meta], f"document {doc.id!r}"))
        digest.update(b"\n")
    return digest.hexdigest()


# GoldenItem fields added after the first fingerprints were logged (the agent's `rows` and `tools`; `candidate`).
_FIELDS_ADDED_LATER = ("rows", "tools", "candidate")


def golden_fingerprint(items: Sequence[GoldenItem]) -> str:
    """sha256 over every field of every golden item (located evidence spans included), in file order; a field
    added since runs were first logged counts only where it is set, so older sets keep their fingerprint."""
    digest = hashlib.sha256()
    for item in items:
        fields = {k: v for k, v in dataclasses.asdict(item).items() if v or k not in _FIELDS_ADDED_LATER}
        digest.update(_canonical_json(fields, f"golden item {item.id!r}"))
        digest.update(b"\n")
    return digest.hexdigest()


def make_dataset(
    name: str,
    language: str,
    documents: list[Document],
    golden: list[GoldenItem],
    settings: Mapping[str, Any],
    source: Mapping[str, Any],
    skipped_files: Mapping[str, str] | None = None,
) -> Dataset:
    """Assemble a Dataset; `language` is `dataset.language`, detected from the documents when "auto", `settings`
    the loader options that change results (sample size, seed, ...), and the `source` a run logs starts with them."""
    corpus_fp = corpus_fingerprint(documents)
    golden_fp = golden_fingerprint(golden)
    combined = _canonical_json(
        {"corpus": corpus_fp, "golden": golden_fp, "settings": dict(settings)}, "settings"
    )
    return Dataset(
        name=name,
        language=resolve_language(language, [doc.content or "" for doc in documents]),
        documents=documents,
        golden=golden,
        corpus_fingerprint=corpus_fp,
        golden_fingerprint=golden_fp,
        fingerprint=hashlib.sha256(combined).hexdigest(),
        source={**settings, **source},
        skipped_files=dict(skipped_files or {}),
    )


def read_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, text) for each non-blank UTF-8 line; a bad byte is reported at its file:line.

    Lines are decoded one by one because a text-mode file decodes whole buffers, losing the line number.
    """
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8-sig")
            except UnicodeDecodeError as exc:
                byte = f"byte 0x{raw[exc.start]:02x} at column {exc.start + 1}"
                raise DatasetError(f"{path}:{number}: not UTF-8 text ({exc.reason}: {byte})") from None
            if line.strip():
                yield number, line


def read_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-blank line, with errors that point at file:line."""
    for number, line in read_lines(path):
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DatasetError(f"{path}:{number}: invalid JSON ({exc.msg})") from None
        if not isinstance(record, dict):
            raise DatasetError(f"{path}:{number}: expected a JSON object, got {type(record).__name__}")
        yield number, record
