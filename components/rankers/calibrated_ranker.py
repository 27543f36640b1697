"""Any Haystack ranker, with its scores put on one scale: normalised, optionally cut, and labelled with a confidence."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from haystack import Document, component, default_to_dict
from haystack.core.serialization import component_to_dict

from components.common.wrapped import wrapped_init_parameters

NORMALISATIONS = ("none", "sigmoid", "minmax")
DEFAULT_BANDS = {"high": 0.7, "medium": 0.4}


@component
class CalibratedRanker:
    """
    Wraps a ranker (a cross-encoder, `E5Reranker`, `LLMRanker`, a diversity ranker) and calibrates what it returns.

    Rankers score on their own scales: cross-encoder logits, cosines near 0.8, or no new score at all. Downstream
    steps (a threshold here, the CRAG evaluator later) need one scale, so the wrapper:
    - normalises the scores: `sigmoid` for logits, `minmax` within the query's candidates, `none` for scores
      already in [0, 1];
    - drops documents below `threshold`, but always keeps the best `min_keep` (when the ranker keeps nothing, as
      an LLM may, the first `min_keep` documents as they came in);
    - keeps each document id once (an LLM may list a candidate twice);
    - labels each document `meta["confidence"]` high, medium or low by `bands`, and keeps the ranker's raw score
      in `meta["rerank_score"]`;
    - with `upstream_weight` > 0, orders by weighted reciprocal-rank fusion of the ranker's order and the order
      the documents came in (the retrieval's), so a weak second stage refines the first instead of replacing it.
      `score` stays the ranker's calibrated score either way.

    ### Usage example
    ```python
    ranker = CalibratedRanker(
        ranker=SentenceTransformersSimilarityRanker(model="BAAI/bge-reranker-v2-m3", scale_score=False),
        normalize="sigmoid", threshold=0.1, min_keep=2,
    )
    ranker.warm_up()
    ranker.run(query="How long is parental leave?", documents=docs)["documents"]
    ```
    """

    def __init__(
        self,
        ranker: Any,
        normalize: str = "none",
        threshold: float | None = None,
        min_keep: int = 1,
        bands: dict[str, float] | None = None,
        upstream_weight: float = 0.0,
        rrf_k: int = 60,
        candidates: int | None = None,
    ) -> None:
        """
        :param ranker: A Haystack component with `run(query, documents, top_k)` returning `documents`.
        :param normalize: "none", "sigmoid" or "minmax".
        :param threshold: Normalised score below which documents are dropped (None keeps all).
        :param min_keep: Documents kept whatever their score, so a strict threshold never empties the context.
        :param bands: Lower bounds of the "high" and "medium" confidence levels; anything lower is "low".
        :param upstream_weight: Weight of the incoming order against the ranker's (1.0); 0 keeps the ranker's.
        :param rrf_k: The rank constant of that fusion, weight / (rrf_k + rank).
        :param candidates: Only the first this many incoming documents are ranked, the rest dropped (an LLM's
            context holds a few chunks); None ranks them all.
        """
        if not callable(getattr(ranker, "run", None)):
            raise TypeError(f"ranker must be a Haystack component with run(), got {type(ranker).__name__}")
        if normalize not in NORMALISATIONS:
            raise ValueError(f"normalize must be one of {list(NORMALISATIONS)}, got {normalize!r}")
        if min_keep < 0:
            raise ValueError(f"min_keep must be >= 0, got {min_keep}")
        bands = dict(DEFAULT_BANDS if bands is None else bands)
        if set(bands) != set(DEFAULT_BANDS) or bands["high"] < bands["medium"]:
            raise ValueError(f"bands must be {{high: x, medium: y}} with x >= y, got {bands}")
        if upstream_weight < 0 or rrf_k < 1:
            raise ValueError(f"upstream_weight must be >= 0 and rrf_k >= 1, got {upstream_weight} and {rrf_k}")
        if candidates is not None and candidates < 1:
            raise ValueError(f"candidates must be None or >= 1, got {candidates}")
        self.ranker = ranker
        self.normalize = normalize
        self.threshold = threshold
        self.min_keep = min_keep
        self.bands = bands
        self.upstream_weight = upstream_weight
        self.rrf_k = rrf_k
        self.candidates = candidates

    def warm_up(self) -> None:
        """Warm the wrapped ranker (model loading happens there)."""
        if hasattr(self.ranker, "warm_up"):
            self.ranker.warm_up()

    def to_dict(self) -> dict[str, Any]:
        """Serialise the component, the wrapped ranker with its own `to_dict()`."""
        return default_to_dict(
            self,
            ranker=component_to_dict(self.ranker, "ranker"),
            normalize=self.normalize,
            threshold=self.threshold,
            min_keep=self.min_keep,
            bands=self.bands,
            upstream_weight=self.upstream_weight,
            rrf_k=self.rrf_k,
            candidates=self.candidates,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CalibratedRanker:
        """Deserialise the component, rebuilding the wrapped ranker from its type."""
        return cls(**wrapped_init_parameters(data, "ranker"))

    @component.output_types(documents=list[Document])
    def run(self, query: str, documents: list[Document], top_k: int | None = None) -> dict[str, list[Document]]:
        """
        Rank, normalise, cut and label.

        :param query: The question the documents are ranked for.
        :param documents: The candidates.
        :param top_k: Passed to the wrapped ranker (None: its own default).
        :returns: `documents`: best first, `score` normalised, with `meta["confidence"]` and `meta["rerank_score"]`.
        """
        if not documents:
            return {"documents": []}
        documents = documents[: self.candidates]
        params: dict[str, Any] = {"query": query, "documents": documents}
        if top_k is not None:
            params["top_k"] = top_k
        ranked = _first_of_each_id(self.ranker.run(**params)["documents"])
        if not ranked and self.min_keep:
            ranked = _first_of_each_id(documents)[: self.min_keep]  # a ranker that keeps nothing (an LLM) empties no context
        raw = [0.0 if doc.score is None else float(doc.score) for doc in ranked]
        labelled = [
            replace(doc, score=score, meta={**doc.meta, "rerank_score": value, "confidence": self.confidence(score)})
            for doc, value, score in zip(ranked, raw, normalise(raw, self.normalize), strict=True)
        ]
        if self.upstream_weight:
            labelled = self._blend(labelled, documents)
        kept = [
            doc for i, doc in enumerate(labelled)
            if self.threshold is None or doc.score >= self.threshold or i < self.min_keep
        ]
        return {"documents": kept}

    def _blend(self, ranked: list[Document], incoming: list[Document]) -> list[Document]:
        upstream: dict[str, int] = {}
        for rank, doc in enumerate(incoming):
            upstream.setdefault(doc.id, rank)
        fused = {
            doc.id: 1.0 / (self.rrf_k + rank) + self.upstream_weight / (self.rrf_k + upstream.get(doc.id, len(incoming)))
            for rank, doc in enumerate(ranked)
        }
        return sorted(ranked, key=lambda doc: -fused[doc.id])

    def confidence(self, score: float) -> str:
        """The level a normalised score falls in."""
        if score >= self.bands["high"]:
            return "high"
        return "medium" if score >= self.bands["medium"] else "low"


def _first_of_each_id(documents: list[Document]) -> list[Document]:
    """An LLM may list a candidate twice; the context gets it once, at its first place."""
    seen: set[str] = set()
    return [doc for doc in documents if not (doc.id in seen or seen.add(doc.id))]


def normalise(scores: list[float], method: str) -> list[float]:
    """Scores on [0, 1]: a logistic of logits, or min-max within the list (all equal: all 1)."""
    if method == "sigmoid":
        return [1.0 / (1.0 + math.exp(-max(min(s, 50.0), -50.0))) for s in scores]
    if method == "minmax" and scores:
        low, high = min(scores), max(scores)
        return [1.0 if high == low else (s - low) / (high - low) for s in scores]
    return list(scores)
