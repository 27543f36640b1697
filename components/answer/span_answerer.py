"""Short extractive answers from a small local LLM: it may only copy a span of the best context sentences."""

from __future__ import annotations

from typing import Any

import jieba
from haystack import Document, component, default_from_dict, default_to_dict
from haystack.dataclasses import ChatMessage
from jinja2 import Template

from components.answer.constrained_choice import choose, load_gguf
from components.answer.extractive_answerer import Candidate, ExtractiveAnswerer, answerable
from components.common.words import HAN

_EDGE_PUNCTUATION = " .,;:!?()[]{}\"'“”‘’。，；：！？（）、"


@component
class SpanAnswerer:
    """
    Rank context sentences like `ExtractiveAnswerer`, then let a llama.cpp model pick the answer span.

    The model continues a few-shot completion prompt (a base model such as Gemma-3-270M needs no chat template)
    by greedy decoding restricted to the word spans of the selected sentences (`constrained_choice.choose`), so
    it cannot invent text: the answer is always a quote, cited with its chunk number. Restricting to a token trie
    instead of a GBNF grammar keeps each step to one forward pass over a 262k-token vocabulary. Chinese sentences
    are cut into jieba words. When no sentence covers at least `min_score` of the question, it refuses without
    calling the model. Haystack's llama.cpp integration ships only a chat generator, which has no raw completion,
    hence this component.

    ### Usage example
    ```python
    answerer = SpanAnswerer(model="/models/gemma.gguf", template=FEW_SHOT, refusals={"en": "I cannot answer..."})
    answerer.warm_up()
    answerer.run(query="How many leave days?", documents=docs)["replies"][0].text  # "20 days [1]"
    ```
    """

    def __init__(
        self,
        model: str,
        template: str,
        refusals: dict[str, str],
        min_score: float = 0.2,
        max_sentences: int = 1,
        max_span_words: int = 8,
        max_text_tokens: int = 96,
        rank_penalty: float = 0.1,
        n_ctx: int = 2048,
        model_kwargs: dict[str, Any] | None = None,
    ) -> None:
        """
        :param model: Path of the GGUF file.
        :param template: Jinja completion prompt; gets `query` and `sentences` (list of str) and ends where the
            answer starts.
        :param refusals: Language -> refusal sentence ("en" is the fallback).
        :param min_score: Question coverage below which the answerer refuses (see ExtractiveAnswerer).
        :param max_sentences: Best sentences offered to the model.
        :param max_span_words: Longest span, in words.
        :param max_text_tokens: Model tokens of sentence text offered per question; the best sentence comes first
            and the text is cut at a word boundary. Prompt evaluation is most of the answerer's time (about 7 ms a
            token for Gemma-3-270M on 2 cores), and the few-shot prefix before the text stays cached. 96 was best or
            tied against 48 and 64 on each of demo-en, demo-zh and HaluEval-200 (docs/results/2026-12-01-first-run.md).
        :param rank_penalty: Prefer sentences of higher-ranked chunks (see ExtractiveAnswerer).
        :param n_ctx: llama.cpp context window.
        :param model_kwargs: More `llama_cpp.Llama` arguments (e.g. seed); by default every core decodes
            (llama-cpp-python would use half, assuming hyper-threads) and flash attention is on.
        :raises ValueError: when `max_span_words` or `max_text_tokens` < 1 (other checks as ExtractiveAnswerer).
        """
        if max_span_words < 1:
            raise ValueError(f"max_span_words must be >= 1, got {max_span_words}")
        if max_text_tokens < 1:
            raise ValueError(f"max_text_tokens must be >= 1, got {max_text_tokens}")
        self.model = model
        self.template = template
        self.refusals = dict(refusals)
        self.min_score = min_score
        self.max_sentences = max_sentences
        self.max_span_words = max_span_words
        self.max_text_tokens = max_text_tokens
        self.rank_penalty = rank_penalty
        self.n_ctx = n_ctx
        self.model_kwargs = dict(model_kwargs or {})
        self._ranker = ExtractiveAnswerer(refusals, min_score, max_sentences, rank_penalty)
        self._prompt = Template(template)
        self._llm: Any = None

    def to_dict(self) -> dict[str, Any]:
        """Serialise the component."""
        return default_to_dict(
            self,
            model=self.model,
            template=self.template,
            refusals=self.refusals,
            min_score=self.min_score,
            max_sentences=self.max_sentences,
            max_span_words=self.max_span_words,
            max_text_tokens=self.max_text_tokens,
            rank_penalty=self.rank_penalty,
            n_ctx=self.n_ctx,
            model_kwargs=self.model_kwargs,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SpanAnswerer:
        """Deserialise the component."""
        return default_from_dict(cls, data)

    def warm_up(self) -> None:
        """Loads the GGUF model once."""
        if self._llm is None:
            self._llm = load_gguf(self.model, self.n_ctx, self.model_kwargs, flash_attn=True)

    @component.output_types(replies=list[ChatMessage])
    def run(self, query: str, documents: list[Document]) -> dict[str, list[ChatMessage]]:
        """
        :param query: The question.
        :param documents: The context, numbered from 1 in this order.
        :returns: `replies`: one assistant message, `span [n]` or the refusal; meta `usage` has the token counts.
        """
        ranked = self._ranker.rank(query, documents)
        best = ranked[: self.max_sentences]
        if not answerable(ranked, self.min_score):
            refusal = self._ranker.refusal(query)
            return {"replies": [ChatMessage.from_assistant(refusal, meta={"model": self.model, "usage": {"llm_calls": 0}})]}
        if self._llm is None:
            raise RuntimeError("SpanAnswerer: call warm_up() before run()")
        span, usage = self._generate(query, best)
        chunk = next((c.chunk for c in best if span in c.sentence), best[0].chunk)
        return {"replies": [ChatMessage.from_assistant(f"{span} [{chunk}]", meta={"model": self.model, "usage": usage})]}

    def _generate(self, query: str, best: list[Candidate]) -> tuple[str, dict[str, int]]:
        sentences = self._fit_budget([c.sentence for c in best])
        spans = {s for sentence in sentences for s in word_spans(sentence, self.max_span_words)}
        prompt = self._prompt.render(query=query, sentences=sentences)
        choice = choose(self._llm, prompt, spans)
        usage = {
            "prompt_tokens": choice.prompt_tokens,
            "completion_tokens": choice.completion_tokens,
            "total_tokens": choice.prompt_tokens + choice.completion_tokens,
            "llm_calls": 1,
        }
        return choice.text, usage

    def _fit_budget(self, sentences: list[str]) -> list[str]:
        """The sentences in rank order, cut at a word boundary once `max_text_tokens` are used up."""
        fitted, left = [], self.max_text_tokens
        for sentence in sentences:
            words, joiner = split_words(sentence)
            kept = len(words)
            text = joiner.join(words)
            used = self._tokens(text)
            while kept and used > left:
                kept -= 1
                text = joiner.join(words[:kept])
                used = self._tokens(text)
            if not kept:
                break
            fitted.append(text)
            left -= used
        return fitted or [sentences[0]]

    def _tokens(self, text: str) -> int:
        return len(self._llm.tokenize((" " + text).encode(), add_bos=False))


def split_words(sentence: str) -> tuple[list[str], str]:
    """Words and the string that joins them back: jieba words with no joiner for Chinese, else whitespace."""
    if HAN.search(sentence):
        return [w for w in jieba.lcut(sentence) if w.strip()], ""
    return sentence.split(), " "


def word_spans(sentence: str, max_words: int) -> set[str]:
    """Every run of up to `max_words` words, trimmed of edge punctuation; Chinese is split by jieba."""
    words, joiner = split_words(sentence)
    spans = set()
    for i in range(len(words)):
        for j in range(i + 1, min(len(words), i + max_words) + 1):
            span = joiner.join(words[i:j]).strip(_EDGE_PUNCTUATION)
            if span:
                spans.add(span)
    return spans
