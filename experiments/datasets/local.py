"""`dataset.kind=local`: a folder of .txt/.md/.html/.pdf/.docx/.pptx/.xlsx/.csv files plus a golden JSONL."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from experiments.datasets.base import (
    Dataset,
    DatasetError,
    make_dataset,
    package_versions,
    read_jsonl,
    resolve_path,
)
from experiments.datasets.golden.evidence import load_golden
from experiments.datasets.settings import LocalDataset
from pipelines.conversion import CONVERSION_PACKAGES, Conversion, convert_files


def load_local(config: LocalDataset) -> Dataset:
    """Convert every matching file under `dataset.corpus_dir`, then load and locate the golden set in it."""
    if config.golden is None:
        raise DatasetError(
            "dataset.golden: required for dataset.kind='local'; no golden set yet? `ragtune testset dataset=local "
            f"dataset.corpus_dir={config.corpus_dir} --out golden.jsonl` writes one from the corpus"
        )
    golden_path = resolve_path(config.golden, "golden", is_dir=False)
    corpus_dir, meta_path = _corpus_paths(config)
    glob, encoding = config.glob, config.encoding
    documents, skipped = load_corpus(corpus_dir, glob, meta_path, encoding)
    golden = load_golden(golden_path, documents, skipped, config.include_candidates)
    source = {
        "corpus_dir": str(corpus_dir),
        "golden": str(golden_path),
        "glob": glob,
        "meta_file": str(meta_path) if meta_path else None,
        "encoding": encoding,
        "documents": len(documents),
        # A detected codec can be wrong for short single-byte texts: keep which files it decided.
        "non_utf8_files": {doc.id: doc.meta["encoding"] for doc in documents if "encoding" in doc.meta},
        "package_versions": package_versions(*CONVERSION_PACKAGES),
    }
    return make_dataset(config.name, config.language, documents, golden, {"kind": "local"}, source, skipped)


def corpus_files(config: LocalDataset) -> Conversion:
    """The documents of `dataset.corpus_dir` (and the files skipped, with why)."""
    corpus_dir, meta_path = _corpus_paths(config)
    return load_corpus(corpus_dir, config.glob, meta_path, config.encoding)


def _corpus_paths(config: LocalDataset) -> tuple[Path, Path | None]:
    corpus_dir = resolve_path(config.corpus_dir, "corpus_dir", is_dir=True)
    meta_path = resolve_path(config.meta_file, "meta_file", is_dir=False) if config.meta_file else None
    return corpus_dir, meta_path


def load_corpus(corpus_dir: Path, glob: str, meta_path: Path | None, encoding: str) -> Conversion:
    """Documents of the files matching `glob` (hidden files and folders excluded), plus the skipped ones."""
    try:
        paths = sorted(
            path
            for path in corpus_dir.glob(glob)
            if path.is_file() and not any(part.startswith(".") for part in path.relative_to(corpus_dir).parts)
        )
    except (ValueError, NotImplementedError) as exc:
        raise DatasetError(f"dataset.glob: invalid pattern {glob!r} ({exc})") from None
    if not paths:
        raise DatasetError(f"dataset.glob: {glob!r} matches no files under {corpus_dir}")
    extra_meta = read_meta_file(meta_path) if meta_path else {}
    metas = {doc_id: meta for doc_id, (_, meta) in extra_meta.items()}
    conversion = convert_files(corpus_dir, paths, metas, encoding=encoding)
    known = {doc.id for doc in conversion.documents} | set(conversion.skipped)
    unknown = [
        f"{meta_path}:{line}: {doc_id!r}" for doc_id, (line, _) in extra_meta.items() if doc_id not in known
    ]
    if unknown:
        raise DatasetError(
            f"dataset.meta_file: {len(unknown)} doc_id(s) are not documents of {corpus_dir}: "
            + "; ".join(unknown[:5])
        )
    return conversion


def read_meta_file(path: Path) -> dict[str, tuple[int, dict[str, Any]]]:
    """doc_id -> (line number, metadata) from a JSONL of {"doc_id": ..., "tenant": ..., "acl": [...]}."""
    entries: dict[str, tuple[int, dict[str, Any]]] = {}
    for number, record in read_jsonl(path):
        if not isinstance(record.get("doc_id"), str):
            raise DatasetError(f'{path}:{number}: expected an object with a string "doc_id"')
        doc_id = record.pop("doc_id")
        if doc_id in entries:
            raise DatasetError(
                f"{path}:{number}: duplicate doc_id {doc_id!r} (first on line {entries[doc_id][0]})"
            )
        check_access_meta(record, f"{path}:{number}")
        entries[doc_id] = (number, record)
    return entries


def check_access_meta(meta: Mapping[str, Any], where: str) -> None:
    """`tenant` a non-empty string and `acl` a non-empty list of them, or absent (null).

    An empty value would mean one thing in memory and another on a server: Weaviate stores `""` and `[]` as null,
    so a document meant for no one would become public there."""
    tenant, acl = meta.get("tenant"), meta.get("acl")
    if tenant is not None and (not isinstance(tenant, str) or not tenant.strip()):
        raise DatasetError(f'{where}: "tenant" must be a non-empty string, or left out for a public document')
    if acl is not None and (
        not isinstance(acl, list) or not acl or not all(isinstance(g, str) and g.strip() for g in acl)
    ):
        raise DatasetError(
            f'{where}: "acl" must be a non-empty list of group names, or left out so that the whole tenant sees '
            "the document"
        )
