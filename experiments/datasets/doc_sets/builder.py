"""Building one set: take its package, parse the selected pages, choose documents and queries, and write the set
into a temporary folder beside the output folder that is swapped in only once complete, so a failed or interrupted
rebuild keeps the previous set."""

from __future__ import annotations

import json
import os
import secrets
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from components.common.paths import cache_root
from experiments.datasets.doc_sets.corpus_files import converted_texts, corpus_files
from experiments.datasets.doc_sets.errors import DocSetError
from experiments.datasets.doc_sets.html_sections import Section, parse_sections
from experiments.datasets.doc_sets.packages import (
    Package,
    default_deb_dir,
    download_package,
    package_info,
    select_pages,
    unpacked,
)
from experiments.datasets.doc_sets.questions import written_items, written_source
from experiments.datasets.doc_sets.readme import readme_text
from experiments.datasets.doc_sets.sampling import (
    Selection,
    doc_id,
    golden_items,
    sample_queries,
    select_sections,
)
from experiments.datasets.doc_sets.specs import CORPUS_SUFFIXES, DocSetSpec
from experiments.runs.output_dir import check_output_folder

BUILDER_VERSION = 2
# Written first into every set's folder: a folder bearing it may be replaced by a rebuild.
MARKER = ".ragtune-doc-set"


def default_root() -> Path:
    """Where `build` puts a set unless told: `<cache root>/doc_sets`, so $RAGTUNE_CACHE moves it like the rest."""
    return cache_root() / "doc_sets"


def build(
    spec: DocSetSpec,
    out_dir: Path,
    deb: Path | None = None,
    deb_dir: Path | None = None,
    max_queries: int | None = None,
    min_heading_words: int = 3,
    min_body_words: int = 30,
    force: bool = False,
) -> dict[str, Any]:
    """Download (or take `deb`), unpack, parse and write the set into `out_dir`; returns SOURCE.json's content.

    `out_dir` is checked first (before the download) and replaced only by a complete set; a folder that is not a
    set ragtune wrote is refused unless `force`. `deb_dir` None: `<cache root>/downloads/debs`.
    """
    check_output_folder(out_dir, force, MARKER)
    package = package_info(deb) if deb else download_package(spec.package, deb_dir or default_deb_dir())
    if package.name != spec.package:
        raise DocSetError(
            f"{package.deb}: is package {package.name!r}, set {spec.name} needs {spec.package!r}"
        )
    max_queries = spec.max_queries if max_queries is None else max_queries
    pages, sections = _read_package(spec, package)
    selection = select_sections(sections, min_heading_words, min_body_words)
    ids = _document_ids(spec, selection.documents)
    files = corpus_files(spec.corpus_format, list(zip(ids, selection.documents, strict=True)))
    texts = converted_texts(files)  # also fails naming a file the product would skip
    if spec.questions:
        items = written_items(spec, texts)
    else:
        suffix = CORPUS_SUFFIXES[spec.corpus_format]
        items = golden_items(spec.name, sample_queries(spec.name, selection.queries, max_queries), suffix)
    filters = {"min_heading_words": min_heading_words, "min_body_words": min_body_words}
    source = _source(spec, package, out_dir, filters, (pages, len(sections)), selection, items)
    _write_set(spec, out_dir, files, items, source)
    return source


def _read_package(spec: DocSetSpec, package: Package) -> tuple[int, list[Section]]:
    """(pages read, their sections in page order) from the spec's pages of the unpacked package."""
    with unpacked(package.deb) as tmp:
        root = tmp / spec.root
        if not root.is_dir():
            raise DocSetError(f"{package.deb}: has no folder {spec.root}")
        pages = select_pages(root, spec.include, spec.exclude)
        if not pages:
            raise DocSetError(f"{package.deb}: no file under {spec.root} matches {list(spec.include)}")
        sections = [
            section
            for page in pages
            for section in parse_sections(page.read_bytes(), page.relative_to(root).as_posix())
        ]
    return len(pages), sections


def _document_ids(spec: DocSetSpec, documents: Sequence[Section]) -> list[str]:
    """The documents' ids; DocSetError when there are too many documents or two share an id."""
    if len(documents) > spec.max_documents:
        raise DocSetError(
            f"{spec.name}: {len(documents)} sections exceed max_documents={spec.max_documents}; "
            "narrow the include patterns"
        )
    ids = [doc_id(section, CORPUS_SUFFIXES[spec.corpus_format]) for section in documents]
    if len(set(ids)) != len(ids):
        raise DocSetError(f"{spec.name}: two sections map to the same doc id")
    return ids


def _source(
    spec: DocSetSpec,
    package: Package,
    out_dir: Path,
    filters: dict[str, int],
    parsed: tuple[int, int],
    selection: Selection,
    items: Sequence[dict[str, Any]],
) -> dict[str, Any]:
    """SOURCE.json: the package, the filters, the counts (`parsed`: pages, sections), how the queries came about,
    and the command that runs the set."""
    corpus = out_dir / "corpus"
    return {
        "name": spec.name,
        "builder": f"experiments.datasets.doc_sets v{BUILDER_VERSION}",
        "package": package.name,
        "version": package.version,
        "deb": package.deb.name,
        "deb_sha256": package.sha256,
        "spec": asdict(spec),
        "filters": filters,
        "pages": parsed[0],
        "sections_parsed": parsed[1],
        "documents": len(selection.documents),
        "dropped": dict(sorted(selection.dropped.items())),
        "documents_without_query": dict(sorted(selection.no_query.items())),
        "queries": len(items),
        **(written_source(spec, items) if spec.questions else {
            "candidate_queries": len(selection.queries),
            "query_sampling": (
                f"all {len(items)} candidate queries"
                if len(items) == len(selection.queries)
                else f"{len(items)} of {len(selection.queries)}: smallest sha256('{spec.name}:<doc id>')"
            ),
        }),
        "load": (
            f"python run.py dataset=local dataset.name={spec.name} dataset.language={spec.language} "
            f"dataset.corpus_dir={corpus} dataset.golden={out_dir / 'golden.jsonl'}"
        ),
    }


def _write_set(
    spec: DocSetSpec,
    out_dir: Path,
    files: Mapping[str, bytes],
    items: Sequence[dict[str, Any]],
    source: dict[str, Any],
) -> None:
    """The set's files (marker first; `files`: doc id -> corpus file) into a staging folder beside `out_dir`, then
    swapped in."""
    staging = out_dir.with_name(f".{out_dir.name}.building-{secrets.token_hex(4)}")
    staging.mkdir()  # not mkdtemp: the set gets the usual permissions, not 0700
    try:
        (staging / MARKER).touch()
        for identifier, data in files.items():
            path = staging / "corpus" / identifier
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        with (staging / "golden.jsonl").open("w", encoding="utf-8") as handle:
            for item in items:
                handle.write(json.dumps(item, ensure_ascii=False) + "\n")
        (staging / "SOURCE.json").write_text(json.dumps(source, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        (staging / "README.md").write_text(readme_text(spec, source), encoding="utf-8")
        _swap_in(staging, out_dir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)  # gone already when swapped in


def _swap_in(staging: Path, out_dir: Path) -> None:
    """Renames `staging` to `out_dir`; a previous `out_dir` is moved aside first and deleted once the new one is in
    place (no rename replaces a non-empty folder in one step)."""
    previous = staging.with_name(f"{staging.name}-previous")
    had_previous = out_dir.exists()
    if had_previous:
        os.rename(out_dir, previous)
    try:
        os.rename(staging, out_dir)
    except BaseException:
        if had_previous:
            os.rename(previous, out_dir)
        raise
    if had_previous:
        shutil.rmtree(previous)
