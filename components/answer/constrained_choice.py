"""Greedy decoding restricted to a fixed set of strings, on a llama.cpp model.

A GBNF grammar of hundreds of alternatives makes llama.cpp test every one of a 262k-token vocabulary against the
grammar at each step. Here the allowed strings are tokenised once into a trie, and each decision reads the logits
of just the few tokens the trie allows next. Tokens the trie forces (the rest of a multi-token word) are evaluated
in one batch with the next decision, and the prompt prefix shared with the previous call (the few-shot examples)
stays in the KV cache.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from components.common import llama_log

STOP_TEXTS = ("\n", "\n\n")


def load_gguf(model: str, n_ctx: int, model_kwargs: dict[str, Any], **defaults: Any) -> Any:
    """A `llama_cpp.Llama` for raw completion: quiet, every core decoding (llama-cpp-python would use half,
    assuming hyper-threads), then the caller's `defaults` and the config's `model_kwargs`, the last winning."""
    from llama_cpp import Llama

    llama_log.install()
    settings = {"verbose": False, "n_threads": os.cpu_count() or 1, **defaults, **model_kwargs}
    return Llama(model_path=model, n_ctx=n_ctx, **settings)


@dataclass
class _Node:
    children: dict[int, _Node] = field(default_factory=dict)
    text: str | None = None  # set where an allowed string ends


@dataclass(frozen=True)
class Choice:
    text: str
    prompt_tokens: int
    completion_tokens: int
    forward_passes: int


class TokenTrie:
    """The allowed strings as token sequences; a string whose tokens prefix another's ends inside the trie."""

    def __init__(self, sequences: Iterable[tuple[str, Sequence[int]]]) -> None:
        self.root = _Node()
        for text, tokens in sequences:
            if not tokens:
                continue
            node = self.root
            for token in tokens:
                node = node.children.setdefault(token, _Node())
            node.text = text


def choose(llm: Any, prompt: str, options: Iterable[str], stop_texts: Sequence[str] = STOP_TEXTS) -> Choice:
    """The option the model continues `prompt` with, by greedy decoding inside the options' token trie.

    Options are tokenised with a leading space, as the text after a colon in a few-shot prompt. Where an option
    ends, the model may also stop, and does when a stop token outscores going on: end of sequence, or a newline
    (`stop_texts`), which is how a few-shot answer line ends. A GBNF grammar allows only end of sequence there,
    so it runs on past the answer ("$310 in London and $250 in other cities" for "$310").
    """
    options = sorted(set(options))
    if not options:
        raise ValueError("choose() needs at least one option")
    trie = TokenTrie((text, llm.tokenize((" " + text).encode(), add_bos=False)) for text in options)
    prompt_tokens = llm.tokenize(prompt.encode(), add_bos=True)
    stops = stop_tokens(llm, stop_texts)
    logits = _eval_with_cached_prefix(llm, prompt_tokens)
    passes, generated, node, pending = 1, 0, trie.root, []
    while node.children:
        if len(node.children) > 1 or node.text is not None:  # a decision: bring the logits up to date
            if pending:
                logits = _eval_tokens(llm, pending)
                passes, pending = passes + 1, []
            if node.text is not None and _stops(logits, stops, node.children):
                break
            token = max(node.children, key=lambda t: logits[t])
        else:  # a forced token is evaluated together with the next decision's
            token = next(iter(node.children))
        node = node.children[token]
        pending.append(token)
        generated += 1
    return Choice(str(node.text), len(prompt_tokens), generated, passes)


def _stops(logits: Any, stops: Sequence[int], children: Iterable[int]) -> bool:
    return max(logits[t] for t in stops) >= max(logits[t] for t in children)


def stop_tokens(llm: Any, stop_texts: Sequence[str] = STOP_TEXTS) -> list[int]:
    """End of sequence, plus each stop text that is a single token."""
    stops = {llm.token_eos()}
    for text in stop_texts:
        tokens = llm.tokenize(text.encode(), add_bos=False)
        if len(tokens) == 1:
            stops.add(tokens[0])
    return sorted(stops)


def _eval_with_cached_prefix(llm: Any, tokens: Sequence[int]) -> Any:
    """Evaluates `tokens`, reusing the KV cache of the longest prefix shared with what the model last saw."""
    cached = llm.input_ids[: llm.n_tokens]
    new = np.asarray(tokens, dtype=cached.dtype)
    limit = min(len(cached), len(new) - 1)  # at least one token is evaluated, so its logits are fresh
    differ = np.flatnonzero(cached[:limit] != new[:limit])
    llm.n_tokens = int(differ[0]) if differ.size else limit
    llm.eval(tokens[llm.n_tokens :])
    return _last_logits(llm)


def _eval_tokens(llm: Any, tokens: Sequence[int]) -> Any:
    llm.eval(tokens)
    return _last_logits(llm)


def _last_logits(llm: Any) -> Any:
    """The logits of the last evaluated position, read in place (a ctypes float array; indexed per token)."""
    import llama_cpp

    return llama_cpp.llama_get_logits_ith(llm.ctx, -1)


def option_probabilities(llm: Any, prompt: str, options: Sequence[str]) -> dict[str, float]:
    """The model's probability of each option as the continuation of `prompt`, renormalised over the options.

    Each option is read by its first token (tokenised with a leading space, as after a colon or question mark in a
    few-shot prompt), so options must differ in their first token, as "yes" and "no" do. One forward pass; the
    prompt prefix shared with the previous call stays in the KV cache.
    """
    firsts = [llm.tokenize((" " + option).encode(), add_bos=False)[0] for option in options]
    if len(set(firsts)) != len(firsts):
        raise ValueError(f"options {list(options)} share a first token, so one pass cannot tell them apart")
    logits = _eval_with_cached_prefix(llm, llm.tokenize(prompt.encode(), add_bos=True))
    values = np.array([logits[t] for t in firsts], dtype=np.float64)
    weights = np.exp(values - values.max())
    return dict(zip(options, (weights / weights.sum()).tolist(), strict=True))
