"""serve.cache: the replies serve.py gave, kept in memory for the same question asked again in the same scope.

A reply is keyed by what decides it and nothing else: the variant that answers (alias, URI, registered version and
index fingerprint), the question and history as normalised text, the pipeline's `stages` option, and the filters
the pipeline is given for the request, which are the principal's scope ANDed with the client's own
(serving.principals.scoped_filters). The key is taken from those very filters, in a canonical form, never from the
principal: two principals of the same tenant and groups share entries, and two scopes never do. What belongs to
one request (its trace id, variant, model version) is added to each reply as it is served, never stored.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
import unicodedata
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from serving.online.variants import Variant
from serving.settings import CacheSettings

# Operators whose value is a set of values: their order says nothing.
SET_OPERATORS = ("in", "not in")


def normalised(text: str) -> str:
    """`text` as the key holds it: NFKC (full-width forms as ASCII), every run of whitespace one space, and
    case-folded (only scripts with case change: Latin, Greek, Cyrillic). Punctuation is kept: it can change a
    question's meaning."""
    return " ".join(unicodedata.normalize("NFKC", text).split()).casefold()


def canonical(node: Mapping[str, Any]) -> dict[str, Any]:
    """A Haystack filter in one form per meaning, as far as reordering goes: the conditions of AND, OR and NOT
    sorted, and the values of `in` and `not in` too. Every key is kept, so two different filters stay different."""
    form = dict(node)
    if "conditions" in form:
        form["conditions"] = sorted((canonical(c) for c in form["conditions"]), key=_dumps)
    elif form.get("operator") in SET_OPERATORS and isinstance(form.get("value"), list):
        form["value"] = sorted(form["value"], key=_dumps)
    return form


def cache_key(
    variant: Variant,
    question: str,
    history: Sequence[Mapping[str, str]],
    filters: Mapping[str, Any],
    stages: bool,
) -> str:
    """The key of a request answered by `variant` with the `filters` the pipeline is given for it."""
    parts = {
        "model": [variant.name, variant.uri, variant.version, variant.index],
        "question": normalised(question),
        "history": [[turn["role"], normalised(turn["content"])] for turn in history],
        "filters": canonical(filters),
        "stages": stages,
    }
    return hashlib.sha256(_dumps(parts).encode()).hexdigest()


class AnswerCache:
    """Replies by key, least recently used first out, bounded by entries and by bytes (a reply as JSON), each kept
    `ttl_s` at most. Thread-safe: serve.py answers in threads. Replies are kept serialised, so a caller can
    change what it gets without changing what is stored."""

    def __init__(self, settings: CacheSettings, clock: Callable[[], float] = time.monotonic) -> None:
        self.settings, self.clock = settings, clock
        self._entries: OrderedDict[str, tuple[bytes, float]] = OrderedDict()
        self._lock = threading.Lock()
        self.bytes = self.hits = self.misses = self.evictions = 0

    def get(self, key: str) -> dict[str, Any] | None:
        """The reply stored under `key` (a hit), or None (a miss); an expired one is dropped and counted evicted."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and self._expired(entry[1]):
                self._drop(key)
                entry = None
            if entry is None:
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
        return json.loads(entry[0])

    def put(self, key: str, reply: Mapping[str, Any]) -> None:
        """Stores `reply`, evicting the least recently used until both bounds hold; a reply larger than
        max_bytes alone is not stored."""
        body = json.dumps(reply, ensure_ascii=False).encode()
        if len(body) > self.settings.max_bytes:
            return
        with self._lock:
            if key in self._entries:
                self._drop(key, evicted=False)
            self._entries[key] = (body, self.clock())
            self.bytes += len(body)
            while len(self._entries) > self.settings.max_entries or self.bytes > self.settings.max_bytes:
                self._drop(next(iter(self._entries)))

    def counts(self) -> dict[str, int]:
        with self._lock:
            return {
                "hits": self.hits,
                "misses": self.misses,
                "evictions": self.evictions,
                "entries": len(self._entries),
                "bytes": self.bytes,
            }

    def _expired(self, stored: float) -> bool:
        ttl = self.settings.ttl_s
        return ttl is not None and self.clock() - stored >= ttl

    def _drop(self, key: str, evicted: bool = True) -> None:
        body, _ = self._entries.pop(key)
        self.bytes -= len(body)
        self.evictions += evicted


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
