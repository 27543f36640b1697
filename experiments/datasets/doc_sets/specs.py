"""The sets that can be built, as data: `specs.yaml` beside this module, loaded into typed, frozen records.

Data rather than code because a set is nothing but eleven plain values: adding one is an entry in the YAML (and, for
hand-written questions, their file in data/validation/), with no code to touch; the loader checks every entry's
keys and types, so a typo fails naming the set and the key instead of building something else.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

SPECS_FILE = Path(__file__).with_name("specs.yaml")
# corpus_format -> the suffix of the set's corpus files (and doc ids).
CORPUS_SUFFIXES = {"text": ".txt", "html": ".html", "docx": ".docx"}


@dataclass(frozen=True)
class DocSetSpec:
    """Where a set's pages come from: a Debian package, a folder inside it, and glob patterns (relative to it)."""

    # The set's name: its folder under `<cache root>/doc_sets/` and the prefix of its golden item ids.
    name: str
    # The Debian package holding the pages (`apt-get download` fetches it).
    package: str
    # The folder inside the unpacked package that the patterns are relative to.
    root: str
    # Glob patterns of the HTML pages to read.
    include: tuple[str, ...]
    # Glob patterns of pages left out although an include pattern matches them.
    exclude: tuple[str, ...] = ()
    # en | zh: the `dataset.language` of the printed run command.
    language: str = "en"
    # One line for `ragtune doc-sets list` and the set's README.
    description: str = ""
    # Heading queries kept at most (sampled by seeded rank); `--max-queries` overrides it.
    max_queries: int = 300
    # More documents than this fail the build: narrow the include patterns.
    max_documents: int = 1500
    # Hand-written questions (data/validation/<file>), used instead of the headings.
    questions: str | None = None
    # How each section is written into corpus/, and so which of the product's converters reads it at index time:
    # text: its body as a .txt file, tables flattened into lines; html: a small .html page with its heading and the
    # page's own elements, read by the HTML converter (headings and tables kept as Markdown); docx: that page's
    # Markdown as a Word file (Word headings and tables), read by Haystack's DOCXToDocument.
    corpus_format: str = "text"


def spec_from_entry(entry: Any, path: Path = SPECS_FILE) -> DocSetSpec:
    """One YAML entry as a record; ValueError naming the set and the key that is unknown, missing or mistyped."""
    if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
        raise ValueError(f"{path}: every entry needs a name, got {entry!r}")
    where = f"{path}: set {entry['name']}"
    hints = typing.get_type_hints(DocSetSpec)
    fields = {f.name: f for f in dataclasses.fields(DocSetSpec)}
    if unknown := sorted(set(entry) - set(fields)):
        raise ValueError(f"{where}: unknown key(s) {unknown}; known: {list(fields)}")
    if missing := [k for k, f in fields.items() if f.default is dataclasses.MISSING and k not in entry]:
        raise ValueError(f"{where}: missing key(s) {missing}")
    values = {}
    for key, value in entry.items():
        if hints[key] == tuple[str, ...]:
            if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
                raise ValueError(f"{where}: {key} must be a list of glob patterns, got {value!r}")
            value = tuple(value)
        elif not isinstance(value, hints[key]) or isinstance(value, bool):
            raise ValueError(f"{where}: {key} must be {fields[key].type}, got {value!r}")
        values[key] = value
    if (corpus_format := values.get("corpus_format", "text")) not in CORPUS_SUFFIXES:
        raise ValueError(f"{where}: corpus_format must be one of {list(CORPUS_SUFFIXES)}, got {corpus_format!r}")
    return DocSetSpec(**values)


def load_specs(path: Path = SPECS_FILE) -> dict[str, DocSetSpec]:
    """Name -> spec, in the file's order (the order `list` prints); ValueError on a bad entry or a repeated name."""
    specs: dict[str, DocSetSpec] = {}
    for entry in yaml.safe_load(path.read_text(encoding="utf-8")):
        spec = spec_from_entry(entry, path)
        if spec.name in specs:
            raise ValueError(f"{path}: set {spec.name} is defined twice")
        specs[spec.name] = spec
    return specs


SPECS: dict[str, DocSetSpec] = load_specs()
