"""The Han character class, the two word counters and the tokens of answer and context metrics, which every module
splits text by.

The Han ranges themselves are `text._HAN`, the project's one definition (Extension A, the unified block, the
compatibility ideographs and Extensions B to F); tests/test_shared_rules.py holds every other module to it. These
names live here and not in text.py because text.py's bytes are the tokeniser's identity (`SOURCE_DIGEST`): an
edit there would rebuild every cached BM25 index, and the index inside each promoted bundle.
"""

import re
import unicodedata

import jieba

from components.common.text import _HAN as HAN_RANGES

HAN = re.compile(f"[{HAN_RANGES}]")
HAN_RUN = re.compile(f"[{HAN_RANGES}]+")
# Runs of word characters (letters, digits, underscore): the words `prose_words` counts.
_WORD_CHARS = re.compile(r"\w+")
_ARTICLES = {"a", "an", "the"}


def budget_words(text: str) -> int:
    """Words as a context budget counts them: whitespace-separated pieces, plus one word per Han character.

    A budget caps what a model reads, so it errs high: a Han character is about one model token, and
    punctuation standing alone counts. Compare `prose_words`, which measures how much a text says.
    """
    return len(HAN.findall(text)) + len(HAN.sub(" ", text).split())


def prose_words(text: str) -> int:
    """Words as a reader counts them: letter/digit runs, plus one word per two Han characters (rounded up).

    Chinese words average about two characters, so "文件系统权限" counts 3 like "file system permissions" and
    one length threshold fits both languages; punctuation is no word. Compare `budget_words`, a cap on model
    input.
    """
    han = len(HAN.findall(text))
    return len(_WORD_CHARS.findall(HAN.sub(" ", text))) + (han + 1) // 2


def answer_tokens(text: str) -> list[str]:
    """Normalised tokens: Latin words without articles, jieba words (precise mode) for Chinese runs.

    SQuAD's normalisation (lowercase, no punctuation, no English articles): answer F1 compares these, and
    `context/tokens` and a context's token budget (`ingest.context_tokens`) count them.
    """
    text = "".join(" " if unicodedata.category(ch).startswith(("P", "S")) else ch for ch in text.lower())
    tokens: list[str] = []
    for piece in text.split():
        for part in re.split(f"({HAN_RUN.pattern})", piece):
            if not part:
                continue
            if HAN_RUN.fullmatch(part):
                tokens.extend(t for t in jieba.lcut(part) if t.strip())
            elif part not in _ARTICLES:
                tokens.append(part)
    return tokens
