"""Language detection and BM25 tokenisation shared by the retrievers and the evaluation.

One tokeniser for indexing, querying and lexical metrics keeps their notions of a "term" identical; its
`identity()` is logged so a run records exactly how text was split.
"""

import hashlib
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from itertools import islice
from pathlib import Path

import jieba
from bm25s.stopwords import STOPWORDS_EN

# jieba logs its dictionary loading at DEBUG level on the root of its own logger; keep run logs clean.
jieba.setLogLevel(logging.WARNING)

LANGUAGES = ("auto", "en", "zh", "mixed")
STOPWORD_LISTS = {"en": frozenset(STOPWORDS_EN)}

TOKENIZER_NAME = "ragtune-unicode-jieba"
# The splitting rules live in this file: any edit to it changes `Tokenizer.identity()` and so rebuilds cached indexes.
SOURCE_DIGEST = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:12]

_HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ebef"
_HAN_RUN = re.compile(f"[{_HAN}]+")
_LATIN_RUN = re.compile(r"[A-Za-z\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u024f]+")
# Letters/digits of any script (no underscore): the only tokens kept outside jieba.
_WORD = re.compile(r"[^\W_]+")
# Han runs go to jieba, every other letter/digit run becomes one token.
_HAN_OR_WORD = re.compile(f"([{_HAN}]+)|([^\\W_{_HAN}]+)")

ZH_LETTER_SHARE = 0.3
MIXED_DOC_SHARE = 0.2
CORPUS_SAMPLE_SIZE = 2000
CORPUS_SAMPLE_CHARS = 2000


def _letter_counts(text: str) -> tuple[int, int]:
    """Count Han characters and Latin letters, the two scripts the detection distinguishes."""
    han = sum(len(run) for run in _HAN_RUN.findall(text))
    latin = sum(len(run) for run in _LATIN_RUN.findall(text))
    return han, latin


def detect_language(text: str) -> str:
    """Return "zh" when Han characters are at least 30% of the Han + Latin letters, else "en"."""
    han, latin = _letter_counts(text)
    return "zh" if han and han >= ZH_LETTER_SHARE * (han + latin) else "en"


def refusal_for(refusals: Mapping[str, str], question: str) -> str:
    """The refusal sentence in the question's language, English when there is none for it."""
    return refusals.get(detect_language(question), refusals["en"])


def detect_corpus_language(texts: Iterable[str]) -> str:
    """Return "zh", "en" or "mixed" (each language in at least 20% of the documents that have letters).

    Only a sample is read so that this stays cheap on large corpora: up to 2000 evenly spaced texts of a
    sequence (the first 2000 of any other iterable), each cut to its first 2000 characters.
    """
    if isinstance(texts, Sequence):
        step = max(1, len(texts) // CORPUS_SAMPLE_SIZE)
        sample: Iterable[str] = texts[::step][:CORPUS_SAMPLE_SIZE]
    else:
        sample = islice(texts, CORPUS_SAMPLE_SIZE)
    zh = en = 0
    for text in sample:
        head = text[:CORPUS_SAMPLE_CHARS]
        if not any(_letter_counts(head)):
            continue
        if detect_language(head) == "zh":
            zh += 1
        else:
            en += 1
    total = zh + en
    if total and min(zh, en) >= MIXED_DOC_SHARE * total:
        return "mixed"
    return "zh" if zh > en else "en"


class Tokenizer:
    """Splits text into BM25 terms: jieba search-mode words for Han text, lowercased letter/digit runs otherwise.

    `language="en"` never touches jieba (fast path, Han runs stay whole tokens); "auto", "zh" and "mixed"
    segment Han runs with `jieba.cut_for_search`, and only for texts that contain Han characters.
    Holds plain attributes only, so it pickles to worker processes.
    """

    def __init__(self, language: str = "auto", lowercase: bool = True, stopwords: str | None = None) -> None:
        """
        :param language: "auto", "en", "zh" or "mixed".
        :param lowercase: Lowercase letter runs (Han text has no case).
        :param stopwords: None, or "en" to drop bm25s's English stopword list.
        """
        if language not in LANGUAGES:
            raise ValueError(f"language must be one of {list(LANGUAGES)}, got {language!r}")
        if stopwords is not None and stopwords not in STOPWORD_LISTS:
            raise ValueError(f"stopwords must be None or one of {sorted(STOPWORD_LISTS)}, got {stopwords!r}")
        self.language = language
        self.lowercase = lowercase
        self.stopwords = stopwords
        self._stopwords = STOPWORD_LISTS[stopwords] if stopwords else frozenset()

    def tokenize(self, text: str) -> list[str]:
        """Return the terms of `text` in order; punctuation and whitespace never become terms."""
        if self.lowercase:
            text = text.lower()
        if self.language == "en" or not _HAN_RUN.search(text):
            tokens = _WORD.findall(text)
        else:
            tokens = []
            for han, word in _HAN_OR_WORD.findall(text):
                if han:
                    tokens.extend(jieba.cut_for_search(han))
                else:
                    tokens.append(word)
        if self._stopwords:
            return [token for token in tokens if token.lower() not in self._stopwords]
        return tokens

    def tokenize_many(self, texts: Iterable[str]) -> list[list[str]]:
        """Tokenise each text; pass a tqdm-wrapped iterable to see progress."""
        return [self.tokenize(text) for text in texts]

    def identity(self) -> dict[str, str]:
        """Describe the tokeniser for logging and for index cache keys."""
        return {
            "name": TOKENIZER_NAME,
            "language": self.language,
            "lowercase": str(self.lowercase).lower(),
            "stopwords": self.stopwords or "none",
            "jieba": "unused" if self.language == "en" else jieba.__version__,
            "code": SOURCE_DIGEST,
        }
