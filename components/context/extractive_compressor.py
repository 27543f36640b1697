"""Cut the context down to the strips that answer the question, without rewriting a character of them."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, replace
from typing import Any

from haystack import Document, component, default_from_dict, default_to_dict

from components.common import llama_log
from components.common.sentences import content_terms, split_sentences
from components.common.words import budget_words


@dataclass(frozen=True)
class Strip:
    chunk: int  # index of its chunk in the input
    start: int  # offsets in the chunk's content
    end: int
    text: str


@component
class ExtractiveCompressor:
    """
    Keeps the strips of the context chunks that best match the question, within a token budget.

    Each chunk is split into sentences (CJK terminators included) and consecutive sentences are merged into strips
    of up to `sentences_per_strip`. A strip scores the idf-weighted share of the question's terms it holds (idf over
    the strips of this context, so a term every strip has counts for little). The best strips are kept while they
    fit `token_budget`, near-duplicates of a kept strip are dropped, and the kept strips come out in context order.
    Strips are exact substrings of their chunk and carry the span of that substring in the source document, so
    evaluation never credits text that was cut. A question whose best strip scores below `min_best_score` is broad
    (it needs the whole context): its chunks pass through whole.

    ### Usage example
    ```python
    compressor = ExtractiveCompressor(token_budget=80)
    compressor.run(query="How many days of leave?", documents=chunks)["documents"]  # strips, in context order
    ```
    """

    def __init__(
        self,
        token_budget: int | None = 160,
        sentences_per_strip: int = 2,
        min_best_score: float = 0.2,
        dedup_threshold: float = 0.8,
        tokenizer_model: str | None = None,
        keep_ratio: float | None = None,
    ) -> None:
        """
        :param token_budget: Most tokens kept: the generator's tokens when `tokenizer_model` is given, else words
            (a Han character counts as one word); None: no cap (with `keep_ratio`, which then decides alone).
        :param sentences_per_strip: Consecutive sentences merged into one strip.
        :param min_best_score: Below this best strip score the question is broad and the context passes whole.
        :param dedup_threshold: A strip whose term overlap (Jaccard) with a kept strip reaches this is dropped.
        :param tokenizer_model: A GGUF file whose vocabulary counts the budget (only the vocabulary is loaded).
        :param keep_ratio: When set, only strips scoring at least this share of the best strip are kept (then the
            budget applies): what is kept depends on how the strips compare, not on how long a language's words are.
        :raises ValueError: on a non-positive budget or strip size, or thresholds outside [0, 1].
        """
        if (token_budget is not None and token_budget < 1) or sentences_per_strip < 1:
            raise ValueError("token_budget (when set) and sentences_per_strip must be at least 1")
        if not (0 <= min_best_score <= 1 and 0 < dedup_threshold <= 1):
            raise ValueError("min_best_score must be in [0, 1] and dedup_threshold in (0, 1]")
        if keep_ratio is not None and not 0 < keep_ratio <= 1:
            raise ValueError("keep_ratio must be None or in (0, 1]")
        self.token_budget = token_budget
        self.sentences_per_strip = sentences_per_strip
        self.min_best_score = min_best_score
        self.dedup_threshold = dedup_threshold
        self.tokenizer_model = tokenizer_model
        self.keep_ratio = keep_ratio
        self._vocab: Any = None

    def to_dict(self) -> dict[str, Any]:
        """Serialise the component."""
        return default_to_dict(
            self,
            token_budget=self.token_budget,
            sentences_per_strip=self.sentences_per_strip,
            min_best_score=self.min_best_score,
            dedup_threshold=self.dedup_threshold,
            tokenizer_model=self.tokenizer_model,
            keep_ratio=self.keep_ratio,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ExtractiveCompressor:
        """Deserialise the component."""
        return default_from_dict(cls, data)

    def warm_up(self) -> None:
        """Loads the vocabulary of `tokenizer_model` (no weights), when the budget counts model tokens."""
        if self.tokenizer_model and self._vocab is None:
            from llama_cpp import Llama

            llama_log.install()
            self._vocab = Llama(model_path=self.tokenizer_model, vocab_only=True, verbose=False)

    @property
    def budget_unit(self) -> str:
        return "model_tokens" if self.tokenizer_model else "words"

    def count_tokens(self, text: str) -> int:
        if self.tokenizer_model:
            self.warm_up()
            return len(self._vocab.tokenize(text.encode(), add_bos=False))
        return budget_words(text)

    @component.output_types(documents=list[Document])
    def run(self, query: str, documents: list[Document]) -> dict[str, list[Document]]:
        """
        :param query: The question the strips must answer.
        :param documents: The context chunks, best first.
        :returns: `documents`: the kept strips in context order (meta `compressed_from`: the chunk id), or the
            chunks themselves for a broad question.
        """
        strips = [s for i, doc in enumerate(documents) for s in self._strips(i, doc.content or "", _prefix(doc))]
        if not strips:
            return {"documents": documents}
        scores = _scores(query, [s.text for s in strips])
        if max(scores) < self.min_best_score:
            return {"documents": documents}
        floor = self.keep_ratio * max(scores) if self.keep_ratio is not None else 0.0
        kept: list[int] = []
        used = 0
        for index in sorted(range(len(strips)), key=lambda i: (-scores[i], i)):
            if scores[index] < floor:
                break
            size = self.count_tokens(strips[index].text) if self.token_budget is not None else 0
            if kept and self.token_budget is not None and used + size > self.token_budget:
                continue
            if any(_jaccard(strips[index].text, strips[k].text) >= self.dedup_threshold for k in kept):
                continue
            kept.append(index)
            used += size
        return {"documents": [_as_document(strips[i], documents[strips[i].chunk], scores[i]) for i in sorted(kept)]}

    def _strips(self, chunk: int, content: str, skip: int) -> list[Strip]:
        """Runs of up to `sentences_per_strip` sentences, each an exact slice of `content` after its first `skip`
        characters (a heading prefix, which is not text of the source document)."""
        positions: list[tuple[int, int]] = []
        cursor = skip
        for sentence in split_sentences(content):
            start = content.find(sentence, cursor)
            if start < 0:  # split_sentences moved a citation marker; such text is not quoted exactly
                continue
            positions.append((start, start + len(sentence)))
            cursor = start + len(sentence)
        step = self.sentences_per_strip
        return [
            Strip(chunk, group[0][0], group[-1][1], content[group[0][0] : group[-1][1]])
            for group in (positions[i : i + step] for i in range(0, len(positions), step))
        ]


def _scores(query: str, texts: list[str]) -> list[float]:
    """Idf-weighted share of the question's terms in each text (idf over `texts`)."""
    terms = [content_terms(text) for text in texts]
    wanted = content_terms(query)
    df = Counter(t for ts in terms for t in ts & wanted)
    idf = {t: math.log((len(texts) + 1) / (df[t] + 0.5)) for t in wanted}
    total = sum(idf.values())
    return [sum(idf[t] for t in ts & wanted) / total if total else 0.0 for ts in terms]


def _jaccard(a: str, b: str) -> float:
    ta, tb = content_terms(a), content_terms(b)
    return len(ta & tb) / len(ta | tb) if ta | tb else 1.0


def _prefix(chunk: Document) -> int:
    """Characters before the source text in a chunk's content (HeadingPrefixer's heading line); 0 without a span."""
    span = chunk.meta.get("span")
    if not (isinstance(span, list | tuple) and len(span) == 2):
        return 0
    return max(0, len(chunk.content or "") - (int(span[1]) - int(span[0])))


def _as_document(strip: Strip, chunk: Document, score: float) -> Document:
    """The strip as a document of its own, with the span of exactly its text in the source document (without a
    span on the chunk, evaluation finds the strip's text in the corpus)."""
    meta = {k: v for k, v in chunk.meta.items() if k != "span"} | {"compressed_from": chunk.id}
    span = chunk.meta.get("span")
    if isinstance(span, list | tuple) and len(span) == 2:
        offset = int(span[0]) - _prefix(chunk)
        meta["span"] = [offset + strip.start, offset + strip.end]
    return replace(chunk, id=f"{chunk.id}@{strip.start}-{strip.end}", content=strip.text, score=score, meta=meta,
                   embedding=None)
