"""A router that learns from examples: k nearest labelled questions by embedding (FlashRAG's SKR judger)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from haystack import component, default_to_dict
from haystack.core.serialization import component_to_dict

from components.common.wrapped import wrapped_init_parameters
from components.routers.routes import RouteDecision, check_route


@component
class KnnRouter:
    """
    Votes among the `k` labelled example questions closest to the question (cosine of the text embedder's
    vectors), each vote weighted by its similarity. The confidence is the winner's share of the weighted vote,
    so a question between two kinds of examples comes out unsure and a cascade asks the next router.

    The examples are a JSONL file (`{"question": ..., "route": ...}` per line), so users label their own
    questions without code; they are embedded once at warm-up.

    ### Usage example
    ```python
    router = KnnRouter(examples="data/router/examples.jsonl", embedder=E5TextEmbedder(model=path), k=5)
    router.warm_up()
    router.run(query="Which costs more, plan A or plan B?")  # {"route": "decompose", "confidence": 0.8, ...}
    ```
    """

    def __init__(self, examples: str, embedder: Any, k: int = 5) -> None:
        """
        :param examples: Path of the labelled examples (JSONL: `question`, `route`; other keys are ignored).
        :param embedder: A text embedder component (`run(text=...)` -> `embedding`), e.g. the index's query embedder.
        :param k: Neighbours that vote.
        :raises ValueError: when k < 1.
        """
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        self.examples = str(examples)
        self.embedder = embedder
        self.k = k
        self._routes: list[str] = []
        self._vectors: np.ndarray | None = None

    def to_dict(self) -> dict[str, Any]:
        """Serialise the component, with its embedder."""
        return default_to_dict(self, examples=self.examples, embedder=component_to_dict(self.embedder, "embedder"), k=self.k)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> KnnRouter:
        """Deserialise the component, with its embedder."""
        return cls(**wrapped_init_parameters(data, "embedder"))

    def warm_up(self) -> None:
        """Loads the embedder and embeds every example once."""
        if self._vectors is not None:
            return
        if hasattr(self.embedder, "warm_up"):
            self.embedder.warm_up()
        questions, self._routes = zip(*read_examples(self.examples), strict=True)
        self._vectors = np.stack([self._embed(q) for q in questions])

    def classify(self, query: str) -> RouteDecision:
        if self._vectors is None:
            raise RuntimeError("KnnRouter: call warm_up() before run()")
        similarity = self._vectors @ self._embed(query)
        nearest = np.argsort(-similarity)[: self.k]
        votes: dict[str, float] = {}
        for i in nearest:
            votes[self._routes[i]] = votes.get(self._routes[i], 0.0) + max(float(similarity[i]), 0.0)
        route = max(votes, key=votes.__getitem__)
        total = sum(votes.values())
        return RouteDecision(route, votes[route] / total if total else 0.0, "knn")

    @component.output_types(route=str, confidence=float, router=str, query=str)
    def run(self, query: str) -> dict[str, Any]:
        """
        :param query: The question.
        :returns: `route`, `confidence` (the winner's share of the similarity-weighted vote), `router` ("knn")
            and the `query`.
        """
        return self.classify(query).outputs(query)

    def _embed(self, text: str) -> np.ndarray:
        vector = np.asarray(self.embedder.run(text=text)["embedding"], dtype=np.float32)
        return vector / (np.linalg.norm(vector) or 1.0)


def read_examples(path: str | Path) -> list[tuple[str, str]]:
    """(question, route) per line of a JSONL file; raises naming file:line for a bad line."""
    examples = []
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as e:
        raise ValueError(f"router examples {path}: cannot be read ({e.strerror})") from e
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"{where}: not valid JSON: {e}") from e
        question = record.get("question") if isinstance(record, dict) else None
        if not isinstance(question, str) or not question.strip():
            raise ValueError(f"{where}: needs a non-empty 'question'")
        examples.append((question, check_route(str(record.get("route")), f"{where}: route")))
    if not examples:
        raise ValueError(f"router examples {path}: no examples")
    return examples
