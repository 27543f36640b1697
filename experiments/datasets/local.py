"""`dataset.kind=local`: a folder of .txt/.md/.html/.pdf files plus a golden JSONL."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from haystack import Document

from experiments.datasets.base import (
    Dataset,
    check_keys,
    make_dataset,
    package_versions,
    read_jsonl,
    resolve_language,
    resolve_path,
)
from experiments.golden import load_golden
from pipelines.conversion import convert_files

KEYS = ("corpus_dir", "golden", "glob", "meta_file")
CONVERSION_PACKAGES = ("haystack-ai", "trafilatura", "pypdf")


def load_local(cfg: Mapping[str, Any]) -> Dataset:
    """Convert every matching file under `dataset.corpus_dir`, then load and locate the golden set in it."""
    check_keys(cfg, KEYS)
    corpus_dir = resolve_path(cfg, "corpus_dir", is_dir=True)
    golden_path = resolve_path(cfg, "golden", is_dir=False)
    meta_path = resolve_path(cfg, "meta_file", is_dir=False) if cfg.get("meta_file") else None
    glob = str(cfg.get("glob") or "**/*")

    documents = load_corpus(corpus_dir, glob, meta_path)
    golden = load_golden(golden_path, documents)
    return make_dataset(
        name=str(cfg.get("name") or "local"),
        language=resolve_language(cfg, [doc.content for doc in documents]),
        documents=documents,
        golden=golden,
        settings={"kind": "local"},
        source={
            "kind": "local",
            "corpus_dir": str(corpus_dir),
            "golden": str(golden_path),
            "glob": glob,
            "meta_file": str(meta_path) if meta_path else None,
            "documents": len(documents),
            "package_versions": package_versions(*CONVERSION_PACKAGES),
        },
    )


def load_corpus(corpus_dir: Path, glob: str, meta_path: Path | None) -> list[Document]:
    """Canonical documents of the files matching `glob` (hidden files and folders excluded)."""
    try:
        paths = sorted(
            path
            for path in corpus_dir.glob(glob)
            if path.is_file() and not any(part.startswith(".") for part in path.relative_to(corpus_dir).parts)
        )
    except (ValueError, NotImplementedError) as exc:
        raise ValueError(f"dataset.glob: invalid pattern {glob!r} ({exc})") from None
    if not paths:
        raise ValueError(f"dataset.glob: {glob!r} matches no files under {corpus_dir}")
    extra_meta = read_meta_file(meta_path) if meta_path else {}
    documents = convert_files(corpus_dir, paths, {doc_id: meta for doc_id, (_, meta) in extra_meta.items()})
    known = {doc.id for doc in documents}
    unknown = [
        f"{meta_path}:{line}: {doc_id!r}" for doc_id, (line, _) in extra_meta.items() if doc_id not in known
    ]
    if unknown:
        raise ValueError(
            f"dataset.meta_file: {len(unknown)} doc_id(s) are not documents of {corpus_dir}: "
            + "; ".join(unknown[:5])
        )
    return documents


def read_meta_file(path: Path) -> dict[str, tuple[int, dict[str, Any]]]:
    """doc_id -> (line number, metadata) from a JSONL of {"doc_id": ..., "tenant": ..., "acl": [...]}."""
    entries: dict[str, tuple[int, dict[str, Any]]] = {}
    for number, record in read_jsonl(path):
        if not isinstance(record.get("doc_id"), str):
            raise ValueError(f'{path}:{number}: expected an object with a string "doc_id"')
        doc_id = record.pop("doc_id")
        if doc_id in entries:
            raise ValueError(f"{path}:{number}: duplicate doc_id {doc_id!r} (first on line {entries[doc_id][0]})")
        entries[doc_id] = (number, record)
    return entries
