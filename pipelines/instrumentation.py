"""What each question cost: per-component latency through Haystack's own tracing hook, so any component in any
pipeline is timed, and every chat-generator call wherever it happens (also inside QueryExpander, LLMRanker or an
Agent, which call their generators themselves)."""

from __future__ import annotations

import contextlib
import functools
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from haystack import Document, tracing
from haystack.dataclasses import ChatMessage, GeneratedAnswer
from haystack.tools import Tool
from haystack.tracing import Span, Tracer

from pipelines.haystack_compat import input_sockets, is_component, output_sockets

COMPONENT_RUN = "haystack.component.run"
COMPONENT_NAME = "haystack.component.name"


# What a lean trace (experiments/evaluation/mlflow_traces.py) keeps of each value a component takes or gives
# (`eval.trace_full=true` keeps everything): the
# first TEXT_DOCUMENTS documents of a list as id, score, span and the start of their text, the next ones up to
# MAX_DOCUMENTS as "id score", and how many more there were.
TEXT_CHARS = 100
TEXT_DOCUMENTS = 3
MAX_DOCUMENTS = 5  # of a list; per_question.jsonl lists every stage's documents in full
STRING_CHARS = 2000  # of any other string (a question, a prompt, an answer)
MAX_NUMBERS = 8  # a longer list of numbers (an embedding) becomes its length


def lean(value: Any, text_documents: int = TEXT_DOCUMENTS) -> Any:
    """A trace-sized copy of `value`: documents cut to what locates them (embeddings and metadata dropped), long
    strings cut, vectors replaced by their length, chat messages to their text, tool calls and usage, tools to
    their names; other values as they are."""
    if isinstance(value, Document):
        return {"id": value.id, "score": value.score, "span": value.meta.get("span"),
                "text": _cut(value.content or "", TEXT_CHARS)}
    if isinstance(value, str):
        return _cut(value, STRING_CHARS)
    if isinstance(value, ChatMessage):
        return _lean_message(value)
    if isinstance(value, Tool):
        return value.name
    if isinstance(value, GeneratedAnswer):
        return {"data": lean(value.data), "documents": lean(value.documents, text_documents), "meta": lean(value.meta)}
    if isinstance(value, dict):
        return {key: lean(item, text_documents) for key, item in value.items()}
    if isinstance(value, list | tuple):
        if len(value) > MAX_NUMBERS and all(isinstance(v, int | float) for v in value):
            return f"<{len(value)} numbers>"
        if value and all(isinstance(item, Document) for item in value):
            shown = [lean(d) if i < text_documents else _located(d) for i, d in enumerate(value[:MAX_DOCUMENTS])]
            more = len(value) - MAX_DOCUMENTS
            return shown + ([f"... {more} more documents (per_question.jsonl lists them all)"] if more > 0 else [])
        return [lean(item, text_documents) for item in value]
    return value


def _lean_message(message: ChatMessage) -> dict[str, Any]:
    """Its role and text, and where it has them: the tools it calls, the tool result it carries, its token usage."""
    shown: dict[str, Any] = {"role": message.role.value, "text": _cut(message.text or "", STRING_CHARS)}
    if message.tool_calls:
        shown["tool_calls"] = [{"tool": c.tool_name, "arguments": lean(c.arguments)} for c in message.tool_calls]
    if message.tool_call_results:
        shown["tool_results"] = [lean(r.result) for r in message.tool_call_results]
    if isinstance(message.meta.get("usage"), dict):
        shown["usage"] = lean(message.meta["usage"])
    return shown


def _located(document: Document) -> str:
    return document.id if document.score is None else f"{document.id} {document.score:.4g}"


def _cut(text: str, chars: int) -> str:
    return text if len(text) <= chars else f"{text[:chars]}... (+{len(text) - chars} chars)"


class _TimedSpan(Span):
    def __init__(self, tags: dict[str, Any], inner: Span | None = None) -> None:
        self.tags = dict(tags)
        self.inner = inner

    def set_tag(self, key: str, value: Any) -> None:
        self.tags[key] = value
        if self.inner is not None:
            self.inner.set_tag(key, value)

    def raw_span(self) -> Any:
        return self if self.inner is None else self.inner.raw_span()


@dataclass(frozen=True)
class ComponentRuns:
    """Per component since the last `take()`: summed wall-clock milliseconds and the number of runs."""

    ms: dict[str, float]
    calls: dict[str, int]


class ComponentTimer(Tracer):
    """Collects wall-clock milliseconds and run counts per component; `take()` returns and clears them.

    Haystack has one active tracer, so while `forward` holds another one (MLflow's, for a traced question) every
    span is opened there too and gets the same tags.
    """

    def __init__(self, forward: Tracer | None = None) -> None:
        self._current: list[_TimedSpan] = []
        self._times: dict[str, float] = defaultdict(float)
        self._calls: Counter[str] = Counter()
        self.forward = forward

    @contextlib.contextmanager
    def trace(
        self, operation_name: str, tags: dict[str, Any] | None = None, parent_span: Span | None = None
    ) -> Iterator[Span]:
        inner_parent = parent_span.inner if isinstance(parent_span, _TimedSpan) else parent_span
        forwarded = (
            self.forward.trace(operation_name, tags, inner_parent) if self.forward else contextlib.nullcontext()
        )
        with forwarded as inner:
            span = _TimedSpan(tags or {}, inner)
            self._current.append(span)
            start = time.perf_counter()
            try:
                yield span
            finally:
                self._current.pop()
                if operation_name == COMPONENT_RUN:
                    name = str(span.tags.get(COMPONENT_NAME))
                    self._times[name] += (time.perf_counter() - start) * 1000
                    self._calls[name] += 1

    def current_span(self) -> Span | None:
        return self._current[-1] if self._current else None

    def take(self) -> ComponentRuns:
        """Runs since the last call (a component run twice in a loop is summed and counted twice)."""
        runs = ComponentRuns(dict(self._times), dict(self._calls))
        self._times, self._calls = defaultdict(float), Counter()
        return runs


@contextlib.contextmanager
def timing_components(forward: Tracer | None = None) -> Iterator[ComponentTimer]:
    """Enables the timer for the block and restores whatever tracer was active before; `forward` (an MlflowTracer,
    experiments/evaluation/mlflow_traces.py) receives every span too."""
    previous = tracing.tracer.actual_tracer
    timer = ComponentTimer(forward)
    tracing.enable_tracing(timer)
    try:
        yield timer
    finally:
        tracing.enable_tracing(previous)


@dataclass(frozen=True)
class ChatUsage:
    """Chat-generator calls since the last `take()`, and the tokens their replies reported."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


class ChatCallCounter:
    """Counts every call of the chat generators it wraps, and sums the `usage` meta of their replies."""

    def __init__(self) -> None:
        self._usage = ChatUsage()

    def record(self, result: Any) -> None:
        prompt = completion = 0
        replies = result.get("replies") if isinstance(result, dict) else None
        for reply in replies or []:
            usage = getattr(reply, "meta", {}).get("usage") or {}
            prompt += int(usage.get("prompt_tokens") or 0)
            completion += int(usage.get("completion_tokens") or 0)
        u = self._usage
        self._usage = ChatUsage(u.calls + 1, u.prompt_tokens + prompt, u.completion_tokens + completion)

    def take(self) -> ChatUsage:
        usage, self._usage = self._usage, ChatUsage()
        return usage


def is_chat_generator(instance: Any) -> bool:
    """Haystack's chat-generator shape: a component taking `messages` and giving `replies`."""
    return is_component(instance) and "messages" in input_sockets(instance) and "replies" in output_sockets(instance)


def chat_generators(components: Iterable[Any], depth: int = 3) -> list[Any]:
    """Chat generators among `components` and inside them (QueryExpander, LLMRanker, Agent hold their own)."""
    found: dict[int, Any] = {}

    def visit(obj: Any, level: int) -> None:
        if level > depth or id(obj) in found:
            return
        if isinstance(obj, list | tuple):
            for value in obj:
                visit(value, level)
            return
        if isinstance(obj, dict):
            for value in obj.values():
                visit(value, level)
            return
        if not is_component(obj):
            return
        if is_chat_generator(obj):  # counted once, at the outermost: a wrapper's inner model is its own call
            found[id(obj)] = obj
            return
        for value in vars(obj).values():
            visit(value, level + 1)

    for instance in components:
        visit(instance, 0)
    return list(found.values())


@contextlib.contextmanager
def counting_chat_calls(components: Iterable[Any]) -> Iterator[ChatCallCounter]:
    """Wraps `run` and `run_async` of every chat generator reachable from `components` for the block."""
    counter = ChatCallCounter()
    wrapped: list[tuple[Any, str]] = []
    for generator in chat_generators(components):
        for method in ("run", "run_async"):
            original = getattr(generator, method, None)
            if original is None:
                continue
            setattr(generator, method, _counted(original, counter, is_async=method == "run_async"))
            wrapped.append((generator, method))
    try:
        yield counter
    finally:
        for generator, method in wrapped:
            delattr(generator, method)  # the instance attribute goes; the class's method shows through again


def _counted(original: Callable[..., Any], counter: ChatCallCounter, is_async: bool) -> Callable[..., Any]:
    if is_async:

        async def run_async(*args: Any, **kwargs: Any) -> Any:
            result = await original(*args, **kwargs)
            counter.record(result)
            return result

        return run_async

    @functools.wraps(original)
    def run(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        counter.record(result)
        return result

    return run
