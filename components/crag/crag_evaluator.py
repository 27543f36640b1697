"""CRAG's retrieval evaluator (Yan et al. 2024): grades the retrieved passages so the pipeline can act on them."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from haystack import Document, component, default_to_dict
from haystack.core.serialization import component_to_dict

from components.common.wrapped import wrapped_init_parameters

LABELS = ("correct", "ambiguous", "incorrect")
GRADES = ("relevant", "ambiguous", "irrelevant")
KEEPS = ("relevant", "not_irrelevant")


@component
class CRAGEvaluator:
    """
    Scores the first `top_k` passages against the question and labels the retrieval as a whole.

    A passage scoring at least `upper` is relevant, one below `lower` irrelevant, the rest ambiguous. The
    question is *correct* when any passage is relevant, *incorrect* when all are irrelevant, *ambiguous*
    otherwise (the reference code's rule, HuskyInSalt/CRAG). The pipeline's ConditionalRouter then picks the
    action from `label`; this component only grades, so the actions stay visible in the graph.

    The score comes from `scorer`, any ranker that sets `Document.score` (E5Reranker cosine, a cross-encoder's
    sigmoid), or, with no scorer, from the score the passages arrive with (a CalibratedRanker's normalised one).
    The thresholds are on that scorer's scale: `ragtune calibrate` fits them on a golden set.

    ### Usage example
    ```python
    evaluator = CRAGEvaluator(upper=0.86, lower=0.82, scorer=E5Reranker(document_store=store))
    evaluator.warm_up()
    result = evaluator.run(query="年假有几天？", documents=retrieved)
    result["label"], result["documents"]  # "correct", the relevant passages, best first
    ```
    """

    def __init__(
        self, upper: float, lower: float, scorer: Any | None = None, top_k: int = 3, correct_keeps: str = "relevant"
    ) -> None:
        """
        :param upper: Score at or above which a passage is relevant.
        :param lower: Score below which a passage is irrelevant; at most `upper`.
        :param scorer: A component with `run(query, documents, top_k)` returning scored `documents`; None reads
            the incoming scores.
        :param top_k: How many of the incoming passages are graded (the rest are not passed on).
        :param correct_keeps: What a correct question passes on: "relevant" passages only, or every
            "not_irrelevant" one (the relevant and the ambiguous), leaving strip selection to the compressor.
        """
        if correct_keeps not in KEEPS:
            raise ValueError(f"correct_keeps must be one of {KEEPS}, got {correct_keeps!r}")
        if lower > upper:
            raise ValueError(f"lower ({lower}) must not exceed upper ({upper})")
        if top_k < 1:
            raise ValueError(f"top_k must be >= 1, got {top_k}")
        self.upper = upper
        self.lower = lower
        self.scorer = scorer
        self.top_k = top_k
        self.correct_keeps = correct_keeps

    def warm_up(self) -> None:
        """Warm the scorer (model loading happens there)."""
        if hasattr(self.scorer, "warm_up"):
            self.scorer.warm_up()

    def to_dict(self) -> dict[str, Any]:
        """Serialise the component, the scorer with its own `to_dict()`."""
        scorer = component_to_dict(self.scorer, "scorer") if self.scorer is not None else None
        return default_to_dict(
            self, upper=self.upper, lower=self.lower, scorer=scorer, top_k=self.top_k, correct_keeps=self.correct_keeps
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CRAGEvaluator:
        """Deserialise the component, rebuilding the scorer from its type."""
        return cls(**wrapped_init_parameters(data, "scorer"))

    @component.output_types(label=str, documents=list[Document], graded=list[Document], query=str)
    def run(self, query: str, documents: list[Document]) -> dict[str, Any]:
        """
        Grade the first `top_k` passages.

        :param query: The question.
        :param documents: The retrieved passages, best first.
        :returns: `label` (correct, ambiguous or incorrect); `documents`: the passages worth keeping, best first
            (when correct, the relevant ones or, with `correct_keeps="not_irrelevant"`, the ambiguous ones too;
            the not-irrelevant ones when ambiguous; none when incorrect);
            `graded`: every graded passage with `meta["crag_score"]` and `meta["crag_grade"]`; `query` as given,
            for the branches.
        """
        top = documents[: self.top_k]
        graded = [self._grade(doc, score) for doc, score in zip(top, self._scores(query, top), strict=True)]
        graded.sort(key=lambda d: d.meta["crag_score"], reverse=True)
        grades = {d.meta["crag_grade"] for d in graded}
        not_irrelevant = [d for d in graded if d.meta["crag_grade"] != "irrelevant"]
        if "relevant" in grades:
            relevant = [d for d in graded if d.meta["crag_grade"] == "relevant"]
            label, kept = "correct", relevant if self.correct_keeps == "relevant" else not_irrelevant
        elif "ambiguous" in grades:
            label, kept = "ambiguous", not_irrelevant
        else:
            label, kept = "incorrect", []
        return {"label": label, "documents": kept, "graded": graded, "query": query}

    def _scores(self, query: str, top: list[Document]) -> list[float]:
        if self.scorer is None or not top:
            return [float(d.score or 0.0) for d in top]
        scored = self.scorer.run(query=query, documents=top, top_k=len(top))["documents"]
        by_id = {d.id: float(d.score or 0.0) for d in scored}
        return [by_id.get(d.id, 0.0) for d in top]

    def _grade(self, doc: Document, score: float) -> Document:
        grade = "relevant" if score >= self.upper else "irrelevant" if score < self.lower else "ambiguous"
        return replace(doc, meta={**doc.meta, "crag_score": score, "crag_grade": grade})
