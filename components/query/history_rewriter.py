"""The offline multi-turn rewriter: a follow-up that leans on the chat history gets that history's key terms."""

from __future__ import annotations

import re
from typing import Any

import jieba
from haystack import component, default_from_dict, default_to_dict
from haystack.dataclasses import ChatMessage

from components.common.sentences import content_terms
from components.common.text import Tokenizer, detect_language

# Words that carry no topic of their own in a Chinese question (English uses the BM25 stopword list).
ZH_STOPWORDS = frozenset(
    {
        "的", "了", "吗", "呢", "吧", "啊", "是", "有", "在", "和", "与", "及", "或", "我", "我们", "你", "你们", "他", "她",
        "它", "他们", "她们", "这", "那", "这个", "那个", "这些", "那些", "什么", "怎么", "怎样", "如何", "多少", "几", "哪", "哪些",
        "哪个", "谁", "要", "会", "能", "可以", "需要", "还", "也", "都", "就", "又", "再", "对", "给", "被", "把", "让", "从",
        "到", "向", "为", "为了", "如果", "那么", "还有", "另外", "以及", "一下", "一个", "请问", "么"
    }
)
_SPLIT = re.compile(r"[\s,，。.!！?？;；:：、\"'“”‘’()（）]+")
_ENGLISH = Tokenizer("en", stopwords="en")


@component
class HistoryRewriter:
    """
    Turns an elliptical follow-up ("And for part-timers?", "那实习生呢？") into a standalone query.

    A question is a follow-up when it opens or ends with a follow-up cue of its language (`cues`, regular
    expressions), or has at most `max_own_terms` content words. A follow-up gets the key terms of the last
    `max_turns` user turns appended (jieba words for Chinese, without stopwords, at most `max_terms`), so that
    BM25 and the embedder both see the topic. Any other question, and every question without history, is left
    untouched: rewriting a complete question can only add noise.

    ### Usage example
    ```python
    rewriter = HistoryRewriter(cues={"en": [r"^(and|what about)\\b"], "zh": [r"呢[？?]?$"]})
    history = [ChatMessage.from_user("How many days of annual leave do full-timers get?")]
    rewriter.run(question="And for part-timers?", history=history)["question"]
    # "And for part-timers? days annual leave full timers"
    ```
    """

    def __init__(
        self, cues: dict[str, list[str]], max_own_terms: int = 2, max_turns: int = 1, max_terms: int = 8
    ) -> None:
        """
        :param cues: Language ("en", "zh") -> regular expressions (case-insensitive) that mark a follow-up.
        :param max_own_terms: A question with at most this many content words is a follow-up even without a cue.
        :param max_turns: How many of the latest user turns lend their terms.
        :param max_terms: At most this many carried terms, in the order the turns use them.
        :raises ValueError: on a cue that does not compile or a non-positive limit.
        """
        if min(max_turns, max_terms) < 1 or max_own_terms < 0:
            raise ValueError("max_turns and max_terms must be at least 1, max_own_terms at least 0")
        try:
            self._cues = {lang: [re.compile(c, re.IGNORECASE) for c in patterns] for lang, patterns in cues.items()}
        except re.error as e:
            raise ValueError(f"cues: a pattern does not compile: {e}") from e
        self.cues = {lang: list(patterns) for lang, patterns in cues.items()}
        self.max_own_terms = max_own_terms
        self.max_turns = max_turns
        self.max_terms = max_terms

    def to_dict(self) -> dict[str, Any]:
        """Serialise the component."""
        return default_to_dict(
            self, cues=self.cues, max_own_terms=self.max_own_terms, max_turns=self.max_turns, max_terms=self.max_terms
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> HistoryRewriter:
        """Deserialise the component."""
        return default_from_dict(cls, data)

    @component.output_types(question=str, queries=list[str], fallback=bool)
    def run(self, question: str, history: list[ChatMessage] | None = None) -> dict[str, Any]:
        """
        :param question: The user's latest question.
        :param history: The earlier turns of the chat, oldest first.
        :returns: `question`: the standalone query; `queries`: the rewrites made (empty when untouched);
            `fallback`: always False (rules cannot fail to parse).
        """
        turns = [m.text or "" for m in history or [] if m.is_from("user")][-self.max_turns :]
        if not turns or not self.is_follow_up(question):
            return {"question": question, "queries": [], "fallback": False}
        carried = self._carried_terms(question, turns)
        if not carried:
            return {"question": question, "queries": [], "fallback": False}
        rewritten = f"{question} {' '.join(carried)}"
        return {"question": rewritten, "queries": [rewritten], "fallback": False}

    def is_follow_up(self, question: str) -> bool:
        """A cue of the question's language, or too few content words of its own to name a topic."""
        language = detect_language(question)
        if any(cue.search(question.strip()) for cue in self._cues.get(language, ())):
            return True
        return len(key_terms(question)) <= self.max_own_terms

    def _carried_terms(self, question: str, turns: list[str]) -> list[str]:
        own = set(key_terms(question)) | content_terms(question)
        carried: list[str] = []
        for turn in turns:
            for term in key_terms(turn):
                if term not in own and term not in carried:
                    carried.append(term)
        return carried[: self.max_terms]


def key_terms(text: str) -> list[str]:
    """Content words in order: English words without stopwords; jieba words of Chinese without stopwords."""
    terms: list[str] = []
    for piece in _SPLIT.split(text):
        if not piece:
            continue
        if detect_language(piece) == "zh":
            terms.extend(w for w in jieba.cut(piece) if w.strip() and w not in ZH_STOPWORDS and len(w) > 1)
        else:
            terms.extend(_ENGLISH.tokenize(piece))
    return list(dict.fromkeys(terms))


def shared_terms(text: str, other: str) -> int:
    """How many content words two texts share: whether an expansion or a look-up is still about the question."""
    return len(set(key_terms(text)) & set(key_terms(other)))
