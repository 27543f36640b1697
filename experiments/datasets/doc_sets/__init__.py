"""Offline evaluation sets built from Debian documentation packages: sections are documents, and the queries are
either the headings or questions written by hand.

A FAQ's headings are questions and a manual's headings name what their section explains, so a package of HTML
documentation becomes a retrieval set without writing a single question by hand. Headings are not how users ask,
so the validation sets (`questions=` in their spec) take natural questions written by hand instead, kept in
`data/validation/<set>.jsonl` with evidence quotes that the build locates in the corpus it writes:

    ragtune doc-sets list
    ragtune doc-sets build python_faq-en        # -> .cache/ragtune/doc_sets/python_faq-en
    python run.py dataset=local dataset.name=python_faq-en \\
        dataset.corpus_dir=.cache/ragtune/doc_sets/python_faq-en/corpus \\
        dataset.golden=.cache/ragtune/doc_sets/python_faq-en/golden.jsonl

`build` runs `apt-get download <package>` (no root needed, but the apt lists must exist: `apt-get update`), unpacks
it with `dpkg-deb -x`, splits every selected HTML page at each heading (h1-h6) and writes:

- `corpus/<page>/<NNN>-<anchor>.txt`: one file per section, the text between its heading and the next heading
  of any level, without the heading itself. Its path relative to `corpus/` is its doc id (as `dataset=local`
  assigns them). A spec's `corpus_format` writes `.html` pages (the heading and the page's own elements, tables
  included, for the product's HTML converter) or `.docx` files (the same as Word headings, paragraphs and tables,
  for Haystack's DOCXToDocument) instead.
- `golden.jsonl`: one item per kept heading: `question` = the heading (numbering removed), `relevant_doc_ids` =
  its own section, `category` = the page it came from; or, for a set with hand-written questions, those questions,
  each evidence quote located in the corpus as `dataset=local` converts it (the build fails naming every quote it
  cannot find).
- `SOURCE.json` and `README.md`: package, version, .deb SHA-256, filters, counts, how queries were sampled.

The cache root is `$RAGTUNE_CACHE` when set, as for `paths.cache`. The set is written into a temporary folder
beside the output folder and swapped in only once complete, so a failed rebuild keeps the previous set. An output
folder that holds anything but a set ragtune wrote (its marker file) is refused unless `--force`.

Filters: a section whose body has fewer than `min_body_words` words is dropped; a section with a generic heading
("Introduction", "Contents", ...) or a heading of fewer than `min_heading_words` words stays in the corpus as a
distractor without a query. Duplicate bodies keep their first section only; a heading that occurs more than
once (after normalisation) is ambiguous, so none of its sections gets a query. Two Han characters count as one
word. The build is deterministic: pages in sorted order, sections in page order, and when a set has more than
`max_queries` candidate queries the kept ones are those with the smallest SHA-256 of `<set name>:<doc id>`.

One job per module: `specs` (the sets, as data in specs.yaml), `packages` (apt-get and dpkg-deb), `html_sections`
(HTML page -> sections), `sampling` (documents, queries and their sampling), `corpus_files` (a section's file in
each corpus format, and its converted text), `docx_files` (Markdown -> .docx), `questions` (hand-written
questions), `readme` (a set's README.md), `builder` (one set end to end) and `cli` (`ragtune doc-sets`).
"""

from experiments.datasets.doc_sets.builder import build
from experiments.datasets.doc_sets.cli import main
from experiments.datasets.doc_sets.errors import DocSetError
from experiments.datasets.doc_sets.specs import SPECS, DocSetSpec

__all__ = ["SPECS", "DocSetError", "DocSetSpec", "build", "main"]
