"""A built set's README.md: what it holds and where it came from, written from its SOURCE.json record."""

from __future__ import annotations

from typing import Any

from experiments.datasets.doc_sets.specs import DocSetSpec

# What one corpus file holds, per corpus_format.
CORPUS_FILES = {
    "text": "one section body each, heading removed",
    "html": "one .html page per section: its heading and the page's own elements, tables included",
    "docx": "one .docx per section: its heading as a Word heading, its tables as Word tables",
}


def readme_text(spec: DocSetSpec, source: dict[str, Any]) -> str:
    return (
        f"# {spec.name}\n\n{spec.description}\n\n"
        f"Built by `ragtune doc-sets build {spec.name}` from the Debian package "
        f"`{source['package']}` {source['version']} (`{source['deb']}`, sha256 {source['deb_sha256']}), "
        f"pages `{spec.root}/{{{','.join(spec.include)}}}`.\n\n"
        f"- documents (`corpus/`, {CORPUS_FILES[spec.corpus_format]}): {source['documents']}\n"
        + (f"- queries (`golden.jsonl`, written by hand): {source['answerable']} answerable, "
           f"{source['unanswerable']} unanswerable; {source['how_written']}\n" if spec.questions else
           f"- queries (`golden.jsonl`, the section heading): {source['queries']} ({source['query_sampling']})\n")
        + f"- dropped sections: {source['dropped']}\n"
        f"- documents without a query: {source['documents_without_query']}\n\n"
        f"Run: `{source['load']}`\n"
    )
