"""`dataset.kind=beir`: a BEIR folder (corpus.jsonl, queries.jsonl, qrels) as canonical documents + golden items."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from haystack import Document

from experiments.datasets.base import (
    Dataset,
    DatasetError,
    make_dataset,
    package_versions,
    read_jsonl,
    read_lines,
    resolve_path,
)
from experiments.datasets.golden.items import GoldenItem
from experiments.datasets.settings import BeirDataset

logger = logging.getLogger(__name__)

_LISTED = 5


def load_beir(config: BeirDataset) -> Dataset:
    """Load the whole corpus and the split's queries that have at least one positive qrel."""
    root = resolve_path(config.path, "path", is_dir=True)
    split, max_queries = config.split, config.max_queries
    corpus_path = _existing(root / "corpus.jsonl", "path")
    queries_path = _existing(root / "queries.jsonl", "path")
    qrels_path = _qrels_path(root, split)

    documents = _read_corpus(corpus_path)
    qrels = _read_qrels(qrels_path, {doc.id for doc in documents})
    golden, dropped = _read_queries(queries_path, qrels, qrels_path)
    if dropped:
        logger.warning(
            "%s: dropped %d quer(y/ies) without a positive qrel in %s", queries_path, dropped, qrels_path
        )
    if max_queries is not None:
        golden = golden[:max_queries]
    if not golden:
        raise DatasetError(
            f"{qrels_path}: no query of {queries_path.name} has a positive qrel (dataset.split={split!r})"
        )

    settings = {"kind": "beir", "split": split, "max_queries": max_queries}
    source = {
        "path": str(root),
        "qrels": str(qrels_path),
        "queries_dropped_without_qrels": dropped,
        "package_versions": package_versions("haystack-ai"),
    }
    return make_dataset(config.name, config.language, documents, golden, settings, source)


def _existing(path: Path, key: str) -> Path:
    """Name the missing BEIR file and the config key that points at its folder."""
    if not path.is_file():
        raise DatasetError(f"dataset.{key}: {path.name} not found in {path.parent}")
    return path


def _qrels_path(root: Path, split: str) -> Path:
    """BEIR keeps one qrels file per split under qrels/; single-split exports have a bare qrels.tsv."""
    candidates = [root / "qrels" / f"{split}.tsv", root / "qrels.tsv"]
    for path in candidates:
        if path.is_file():
            return path
    raise DatasetError(
        f"dataset.split: no qrels for split {split!r}: looked for {' and '.join(str(p) for p in candidates)}"
    )


def _field(record: dict[str, Any], key: str, where: str, *, required: bool) -> str:
    """A string field (ids may be numbers in some exports; they are compared as strings)."""
    value = record.get(key)
    if value is None:
        if required:
            raise DatasetError(f"{where}: missing {key!r}")
        return ""
    if not isinstance(value, str | int) or isinstance(value, bool):
        raise DatasetError(f"{where}: {key!r} must be a string, got {type(value).__name__}")
    return str(value)


def _read_corpus(path: Path) -> list[Document]:
    """Canonical text = title + blank line + text (title alone kept in meta); other fields go to meta as-is."""
    documents: dict[str, Document] = {}
    for number, record in read_jsonl(path):
        where = f"{path}:{number}"
        doc_id = _field(record, "_id", where, required=True)
        title = _field(record, "title", where, required=False).strip()
        text = _field(record, "text", where, required=True)
        if doc_id in documents:
            raise DatasetError(f"{where}: duplicate _id {doc_id!r}")
        meta = {key: value for key, value in record.items() if key not in {"_id", "title", "text"}}
        meta["doc_id"] = doc_id
        if title:
            meta["title"] = title
        content = f"{title}\n\n{text}" if title else text
        documents[doc_id] = Document(id=doc_id, content=content, meta=meta)
    if not documents:
        raise DatasetError(f"{path}: the corpus is empty")
    return [documents[doc_id] for doc_id in sorted(documents)]


def _read_qrels(path: Path, doc_ids: set[str]) -> dict[str, dict[str, int]]:
    """query id -> {doc id: relevance > 0}; a header line is optional; unknown doc ids are an error."""
    qrels: dict[str, dict[str, int]] = {}
    unknown: list[str] = []
    first = True
    for number, line in read_lines(path):
        is_first, first = first, False
        fields = line.rstrip("\r\n").split("\t")
        if len(fields) != 3:
            raise DatasetError(f"{path}:{number}: expected 3 tab-separated fields (query-id corpus-id score)")
        query_id, doc_id, score = (field.strip() for field in fields)
        try:
            relevance = int(score)
        except ValueError:
            if is_first:
                continue  # header line, e.g. "query-id corpus-id score"
            raise DatasetError(f"{path}:{number}: score must be an integer, got {score!r}") from None
        if doc_id not in doc_ids:
            unknown.append(f"{path}:{number}: {doc_id!r}")
            continue
        if relevance > 0:
            qrels.setdefault(query_id, {})[doc_id] = relevance
        else:
            qrels.setdefault(query_id, {})
    if unknown:
        raise DatasetError(
            f"{path}: {len(unknown)} qrel(s) name doc ids missing from corpus.jsonl, e.g. "
            + "; ".join(unknown[:_LISTED])
        )
    return qrels


def _read_queries(
    path: Path, qrels: dict[str, dict[str, int]], qrels_path: Path
) -> tuple[list[GoldenItem], int]:
    """Golden items in queries.jsonl order for the queries of this split; returns (items, dropped count)."""
    items: list[GoldenItem] = []
    seen: set[str] = set()
    dropped = 0
    for number, record in read_jsonl(path):
        where = f"{path}:{number}"
        query_id = _field(record, "_id", where, required=True)
        if query_id in seen:
            raise DatasetError(f"{where}: duplicate _id {query_id!r}")
        seen.add(query_id)
        if query_id not in qrels:
            continue  # a query of another split
        relevant = qrels[query_id]
        if not relevant:
            dropped += 1
            continue
        answer = _field(record, "answer", where, required=False) or None
        extra = {key: value for key, value in record.items() if key not in {"_id", "text", "answer"}}
        items.append(
            GoldenItem(
                id=query_id,
                question=_field(record, "text", where, required=True),
                reference_answer=answer,
                relevant_doc_ids=tuple(sorted(relevant)),
                extra={**extra, "relevance": dict(sorted(relevant.items()))},
            )
        )
    missing = sorted(set(qrels) - seen)
    if missing:
        raise DatasetError(
            f"{qrels_path}: {len(missing)} query id(s) missing from {path}, e.g. {', '.join(missing[:_LISTED])}"
        )
    return items, dropped
