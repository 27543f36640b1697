"""Turn a model reply into an auditable answer: which chunk each claim cites, and whether that chunk supports it."""

from __future__ import annotations

import re
from typing import Any

from haystack import Document, component, default_from_dict, default_to_dict
from haystack.dataclasses import ChatMessage, GeneratedAnswer

from components.answer.answer_meta import AnswerMeta, CitationMeta, SentenceSupport
from components.common.sentences import CITATION, parse_citations, split_sentences, strip_citations, support


@component
class CitationVerifier:
    """
    Parse `[n]` citations, map them to the numbered context chunks, and check each sentence against its sources.

    Produces the same `answers` socket as Haystack's `AnswerBuilder` (which can parse references but not check
    them), so it is a drop-in replacement. A sentence is supported when the share of its content words found in
    the chunks it cites reaches `support_threshold`; an uncited sentence is checked against no source and so is
    unsupported. Citations of chunk numbers outside the context are dropped from the answer text and reported.

    ### Usage example
    ```python
    verifier = CitationVerifier(refusals={"en": "I cannot answer this from the provided documents."})
    result = verifier.run(query=q, replies=[ChatMessage.from_assistant("20 days [1].")], documents=context)
    result["answers"][0].meta["citations"]  # [{"marker": 1, "doc_id": ..., "start": ..., "end": ..., ...}]
    ```
    """

    # The answer meta it fills: ragtune's answer contract (pipelines/answer_contract.py), checked at build time.
    answer_meta_keys = ("refused", "citations", "unsupported_sentences", "sentences", "invalid_citations", "usage")

    def __init__(
        self, refusals: dict[str, str], refusal_patterns: list[str] | None = None, support_threshold: float = 0.5
    ) -> None:
        """
        :param refusals: Language -> the refusal sentence the prompt asks for.
        :param refusal_patterns: Extra regular expressions (case-insensitive) that also count as a refusal.
        :param support_threshold: Minimum lexical support in [0, 1] for a sentence to count as supported.
        :raises ValueError: on a threshold outside [0, 1] or a pattern that does not compile.
        """
        if not 0 <= support_threshold <= 1:
            raise ValueError(f"support_threshold must be in [0, 1], got {support_threshold}")
        self.refusals = dict(refusals)
        self.refusal_patterns = list(refusal_patterns or [])
        self.support_threshold = support_threshold
        self._refusals = [_normalise(sentence) for sentence in refusals.values()]
        try:
            self._patterns = [re.compile(p, re.IGNORECASE) for p in self.refusal_patterns]
        except re.error as e:
            raise ValueError(f"refusal_patterns: {e}") from e

    def to_dict(self) -> dict[str, Any]:
        """Serialise the component."""
        return default_to_dict(
            self,
            refusals=self.refusals,
            refusal_patterns=self.refusal_patterns,
            support_threshold=self.support_threshold,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CitationVerifier:
        """Deserialise the component."""
        return default_from_dict(cls, data)

    def is_refusal(self, text: str) -> bool:
        """The refusal sentence of any language (ignoring case, quotes and punctuation), or a refusal pattern."""
        text = strip_citations(text)
        normalised = _normalise(text)
        return any(r in normalised for r in self._refusals) or any(p.search(text) for p in self._patterns)

    @component.output_types(answers=list[GeneratedAnswer], unsupported_sentences=list[str], sources=list[dict])
    def run(self, query: str, replies: list[ChatMessage], documents: list[Document]) -> dict[str, Any]:
        """
        :param query: The question, kept on the answer.
        :param replies: The model's replies; the last one is the answer.
        :param documents: The context exactly as numbered in the prompt ([1] is `documents[0]`).
        :returns: `answers`: one GeneratedAnswer whose `documents` are the cited chunks and whose meta holds
            `refused`, `citations`, `invalid_citations`, `sentences` and `unsupported_sentences`;
            `unsupported_sentences`; `sources`: the cited chunks' doc ids and character spans.
        """
        raw = (replies[-1].text or "").strip() if replies else ""
        refused = self.is_refusal(raw) if raw else True
        in_context = set(range(1, len(documents) + 1))
        cited = parse_citations(raw)
        invalid = [n for n in cited if n not in in_context]
        text = _drop_markers(raw, invalid)
        sentences = [] if refused else [self._check(s, documents, in_context) for s in split_sentences(text)]
        sources = [_source(n, documents[n - 1]) for n in cited if n in in_context]
        unsupported = [s["text"] for s in sentences if not s["supported"]]
        answer = GeneratedAnswer(
            data=text,
            query=query,
            documents=[documents[n - 1] for n in cited if n in in_context],
            meta=AnswerMeta(
                raw=raw,
                refused=refused,
                citations=sources,
                invalid_citations=invalid,
                sentences=sentences,
                unsupported_sentences=unsupported,
                usage=_usage(replies),
            ),
        )
        return {"answers": [answer], "unsupported_sentences": unsupported, "sources": sources}

    def _check(self, sentence: str, documents: list[Document], in_context: set[int]) -> SentenceSupport:
        markers = [n for n in parse_citations(sentence) if n in in_context]
        score = support(sentence, [documents[n - 1].content or "" for n in markers]) if markers else 0.0
        return SentenceSupport(
            text=strip_citations(sentence),
            citations=markers,
            support=round(score, 4),
            supported=bool(markers) and score >= self.support_threshold,
        )


def _normalise(text: str) -> str:
    return re.sub(r"[\s\"'“”‘’.,!?。，！？]+", " ", text).strip().lower()


def _drop_markers(text: str, invalid: list[int]) -> str:
    """Removes citations of chunks that were never in the context; valid numbers in the same marker stay."""
    if not invalid:
        return text

    def keep_valid(match: re.Match[str]) -> str:
        valid = [n for n in parse_citations(match.group(0)) if n not in invalid]
        return f"[{', '.join(map(str, valid))}]" if valid else ""

    return re.sub(r"\s+([.。])", r"\1", CITATION.sub(keep_valid, text)).strip()


def _source(marker: int, doc: Document) -> CitationMeta:
    span = doc.meta.get("span") or [None, None]
    return CitationMeta(marker=marker, chunk_id=doc.id, doc_id=doc.meta.get("doc_id"), start=span[0], end=span[1])


def _usage(replies: list[ChatMessage]) -> dict[str, int]:
    """Token counts the generator reported (OpenAI-style `usage` meta); empty for non-LLM answerers."""
    totals: dict[str, int] = {}
    for reply in replies:
        for key, value in (reply.meta.get("usage") or {}).items():
            if isinstance(value, int):
                totals[key] = totals.get(key, 0) + value
    return totals
