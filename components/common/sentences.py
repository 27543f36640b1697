"""Sentences, citation markers and lexical support: shared by the extractive answerer and the citation verifier.

Kept apart from `components/common/text.py` because that file's digest is part of the BM25 index identity.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

from components.common.sentence_units import SENTENCE_END
from components.common.text import Tokenizer

# [1] [1, 2] [1-3] [1][2] 【1】, with ASCII or full-width commas and the Chinese enumeration comma.
CITATION = re.compile(r"[\[【]\s*(\d+(?:\s*[,，、\-–]\s*\d+)*)\s*[\]】]")
_LEADING_CITATIONS = re.compile(rf"^(?P<citations>(?:\s*{CITATION.pattern})+[.。]?)\s*(?P<rest>.*)$")
MAX_CITATION_RANGE = 50

_TOKENIZER = Tokenizer("auto", stopwords="en")


def parse_citations(text: str) -> list[int]:
    """Chunk numbers cited in `text`, in order of first appearance; `[2-4]` expands to 2, 3, 4."""
    numbers: list[int] = []
    for match in CITATION.finditer(text):
        for part in re.split(r"\s*[,，、]\s*", match.group(1)):
            bounds = [int(n) for n in re.split(r"\s*[\-–]\s*", part)]
            low, high = bounds[0], bounds[-1]
            span = range(low, high + 1) if 0 <= high - low <= MAX_CITATION_RANGE else (low, high)
            numbers.extend(n for n in span if n not in numbers)
    return numbers


def strip_citations(text: str) -> str:
    """The text without citation markers (what answer metrics compare against the reference)."""
    return re.sub(r"\s+([.,。，!?！？])", r"\1", CITATION.sub("", text)).strip()


def split_sentences(text: str) -> list[str]:
    """Sentences of an answer or chunk; citations after a full stop ("... leave. [1]") join the sentence before."""
    sentences: list[str] = []
    for line in text.splitlines():
        for piece in SENTENCE_END.split(line):
            piece = piece.strip()
            leading = _LEADING_CITATIONS.match(piece)
            if sentences and leading:
                sentences[-1] = f"{sentences[-1]} {leading['citations'].strip()}"
                piece = leading["rest"].strip()
            if piece:
                sentences.append(piece)
    return sentences


@lru_cache(maxsize=8192)
def content_terms(text: str) -> frozenset[str]:
    """Lowercased words without English stopwords; jieba words for Chinese. Cached: the same retrieved chunks
    and sentences come back across questions and are checked by both the answerer and the verifier."""
    return frozenset(_TOKENIZER.tokenize(strip_citations(text)))


def support(claim: str, sources: Iterable[str]) -> float:
    """Share of the claim's content terms found in the sources: 1.0 when every term is there, 0.0 for none."""
    terms = content_terms(claim)
    if not terms:
        return 1.0
    available: set[str] = set()
    for source in sources:
        available |= content_terms(source)
    return len(terms & available) / len(terms)
