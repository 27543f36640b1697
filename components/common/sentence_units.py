"""Sentence units of a sentence-window index: where a text is cut, and the meta field that numbers its units.

Its own module because the index fingerprint of `ingest=sentence_window` hashes it (the splitter's INDEX_CODE):
answer-side sentence code (components/common/sentences.py) can change without rebuilding those indexes.
"""

from __future__ import annotations

import re
from itertools import pairwise

# A sentence ends at . ! ? followed by whitespace, at a CJK terminator (no space follows those), or at a
# lowercase word's full stop glued to a capital ("director.Aleksander", as in scraped passages; not "U.S.").
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[^a-z])|(?<=[。！？；])|(?<=[a-z0-9)\]\"”][.!?])(?=[A-Z])")
_LINE_BREAK = re.compile(r"\n\s*")
# The unit's number in its document. DocumentSplitter writes it as `split_id`, which ChunkSpanLocator drops with
# the rest of a splitter's bookkeeping; under this name it reaches the store, where SentenceWindowRetriever reads it
# (with `doc_id` for the document).
SENTENCE_ID = "sentence_id"


def sentence_units(text: str, min_chars: int = 0) -> list[str]:
    """`text` cut at split_sentences' sentence ends and at line breaks, into units that join back to it exactly:
    each keeps the whitespace after it, so a splitter's offsets stay true. A unit of fewer than `min_chars` non-blank
    characters (a heading, "Yes.") joins the next one, the last such unit the one before."""
    ends = {_skip_space(text, m.end()) for m in SENTENCE_END.finditer(text)}
    cuts = ends | {m.end() for m in _LINE_BREAK.finditer(text)}
    bounds = [0, *sorted(cut for cut in cuts if 0 < cut < len(text)), len(text)]
    units: list[str] = []
    pending = ""
    for start, end in pairwise(bounds):
        pending += text[start:end]
        if len(pending.strip()) >= max(min_chars, 1):
            units.append(pending)
            pending = ""
    if pending and units:
        units[-1] += pending
    elif pending:
        units.append(pending)
    return units


def _skip_space(text: str, at: int) -> int:
    """Past the whitespace at `at`: a CJK sentence end is zero-width, and what follows it belongs to its unit."""
    while at < len(text) and text[at].isspace():
        at += 1
    return at
