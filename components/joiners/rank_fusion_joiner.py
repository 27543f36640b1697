"""Fusion of named retrieval paths, with per-path weights, score floors and query-language fit."""

from collections.abc import Mapping, Sequence
from dataclasses import replace
from math import inf
from typing import Any

import numpy as np
from haystack import Document, component, default_from_dict, default_to_dict
from haystack.components.joiners import DocumentJoiner
from haystack.core.component.types import Variadic

from components.common.text import detect_language

# Our mode names -> DocumentJoiner join modes; rrf is computed here because DocumentJoiner fixes k.
MODES = {
    "rrf": "reciprocal_rank_fusion",
    "dbsf": "distribution_based_rank_fusion",
    "merge": "merge",
    "concatenate": "concatenate",
}
QUERY_LANGUAGES = ("en", "zh")
# Per-query path confidence: how clearly a path's best hit stands out from its next ones.
CONFIDENCE_SIGNALS = ("gap", "entropy")
CONFIDENCE_DEPTH = 10  # the top scores a path's confidence is read from
# `degraded`: the paths that failed for this request, from each path's PathGuard (components/retrievers/path_guard.py).
DEGRADED = "degraded"
RESERVED_SOCKETS = ("query", "top_k", DEGRADED)


def _check_path_keys(name: str, mapping: Mapping[str, Any] | None, paths: list[str]) -> None:
    """Reject a per-path setting that names no path, so a typo cannot silently do nothing."""
    for key in mapping or {}:
        if key not in paths:
            raise ValueError(f"{name} names unknown path {key!r}; valid paths: {paths}")


def _checked_paths(paths: Any) -> list[str]:
    """The path names as a list: non-empty, unique, and each a socket name the joiner does not use itself."""
    paths = list(paths) if isinstance(paths, Sequence) and not isinstance(paths, str) else []
    if not paths:
        raise ValueError("paths must be a non-empty list of path names")
    for path in paths:
        if not isinstance(path, str) or not path.isidentifier():
            raise ValueError(f"paths: {path!r} is not a valid socket name")
        if path in RESERVED_SOCKETS:
            raise ValueError(f"paths: {path!r} is reserved for the joiner's own input; rename the path")
    if len(set(paths)) != len(paths):
        raise ValueError(f"paths must be unique, got {paths}")
    return paths


def check_fusion_settings(
    mode: str,
    rrf_k: float,
    unfit_weight: float,
    agreement_bonus: float,
    top_k: int | None,
    confidence: str | None,
    confidence_strength: float,
) -> None:
    """The joiner's scalar settings, each checked against its range so a bad value fails when the pipeline builds
    (and, through retriever.fusion's record, when a run's config is validated)."""
    _require(mode in MODES, "mode", f"must be one of {list(MODES)}, got {mode!r}")
    _require(rrf_k > 0, "rrf_k", f"must be > 0, got {rrf_k}")
    _require(unfit_weight >= 0, "unfit_weight", f"must be >= 0, got {unfit_weight}")
    _require(agreement_bonus >= 0, "agreement_bonus", f"must be >= 0, got {agreement_bonus}")
    _require(top_k is None or top_k > 0, "top_k", f"must be None or > 0, got {top_k}")
    _require(confidence is None or confidence in CONFIDENCE_SIGNALS, "confidence",
             f"must be None or one of {list(CONFIDENCE_SIGNALS)}, got {confidence!r}")
    _require(confidence_strength >= 0, "confidence_strength", f"must be >= 0, got {confidence_strength}")


class FusionSettingError(ValueError):
    """A joiner setting out of its range; `parameter` names it, so a config can name its own key."""

    def __init__(self, parameter: str, rule: str) -> None:
        super().__init__(f"{parameter} {rule}")
        self.parameter, self.rule = parameter, rule


def _require(ok: bool, parameter: str, rule: str) -> None:
    if not ok:
        raise FusionSettingError(parameter, rule)


def _check_per_path(
    paths: list[str],
    weights: Mapping[str, float] | None,
    min_scores: Mapping[str, float] | None,
    path_languages: Mapping[str, list[str]] | None,
) -> None:
    """Per-path settings name known paths, weights are >= 0 and languages are ones the joiner detects."""
    for name, mapping in (
        ("weights", weights),
        ("min_scores", min_scores),
        ("path_languages", path_languages),
    ):
        _check_path_keys(name, mapping, paths)
    for path, weight in (weights or {}).items():
        if weight < 0:
            raise ValueError(f"weights[{path!r}] must be >= 0, got {weight}")
    for path, languages in (path_languages or {}).items():
        unknown = [language for language in languages if language not in QUERY_LANGUAGES]
        if unknown:
            raise ValueError(
                f"path_languages[{path!r}] has unknown languages {unknown}; valid: {list(QUERY_LANGUAGES)}"
            )


def _rescale(documents: list[Document]) -> list[float]:
    """DocumentJoiner's DBSF rule: (score - (mean - 3 std)) / 6 std. A list whose scores do not vary (one hit, or
    all tied) maps to 0.5, the mean's place, where DocumentJoiner keeps the raw score and so lets one raw BM25 score
    (often > 3) outrank every rescaled score of the other path."""
    values = np.array([doc.score or 0.0 for doc in documents], dtype=float)
    spread = 6 * values.std()
    if spread == 0:
        return [0.5] * len(values)
    return list((values - (values.mean() - spread / 2)) / spread)


def path_confidence(documents: list[Document], signal: str) -> float:
    """How clearly the list's best hit stands out, in [0, 1]; a single hit is fully confident, ties are not."""
    values = np.array([doc.score or 0.0 for doc in documents[:CONFIDENCE_DEPTH]], dtype=float)
    if len(values) < 2:
        return 1.0
    spread = values.max() - values.min()
    if spread == 0:
        return 0.0
    if signal == "gap":
        top = np.sort(values)[::-1]
        return float((top[0] - top[1]) / spread)
    z = (values - values.mean()) / values.std()
    p = np.exp(z - z.max())
    p /= p.sum()
    entropy = -float((p * np.log(p + 1e-12)).sum())
    return 1.0 - entropy / float(np.log(len(values)))


@component
class RankFusionJoiner:
    """
    Fuses the ranked lists of named retrieval paths (one input socket per path) into one list.

    Haystack's DocumentJoiner hard-codes RRF k=61 over 0-based ranks, takes weights by the order of its
    variadic input and has no per-path minimum score. Here every path is a named socket
    (`pipe.connect("bm25.documents", "joiner.bm25")`), so weights, score floors and languages are keyed by
    path name:

    - `min_scores[path]`: that path's documents scoring below it are dropped before fusion, so a path without
      real matches does not feed a fake ranking.
    - `path_languages[path]`: when the query's detected language is not listed, the path's weight is
      multiplied by `unfit_weight` (0 drops the path).
    - `rrf`: score = sum over paths of weight / (rrf_k + rank), ranks 1-based, weights not normalised.
    - `dbsf`: each path's scores are rescaled by DocumentJoiner's distribution-based rule (mean ± 3 std -> 0..1)
      and weighted; a document scores its best path plus `agreement_bonus` times its other paths. With a bonus of
      0 this is DocumentJoiner's DBSF, except that a list whose scores do not vary is placed at 0.5. Score-aware
      fusion keeps a confident path's top hit on top, which rank-only RRF loses when the other path is weak
      (see docs/pipelines.md, "Fusion defaults").
    - `merge` and `concatenate` are delegated to DocumentJoiner (only `merge` uses weights there).
    - `confidence` ("gap" or "entropy") with `confidence_strength` > 0 makes the weights query-adaptive: each
      path's weight is multiplied by (0.1 + c) ** strength, where c in [0, 1] says how clearly that path's top
      hit stands out in this query's list: the gap between its first and second score over the range of its
      top 10 ("gap"), or one minus the normalised entropy of a softmax over its z-scored top 10 ("entropy").
    A zero-weight path is dropped in every mode.

    Paths run by a PathGuard name themselves on the `degraded` input when they failed for this request: fusion
    ranks the other paths' lists, and hands the failed paths on as `degraded` (in path order). When every path
    failed there is nothing to rank from, and it raises.

    Ties are broken by the best single-path rank, then by id. Each output document is a copy whose meta gets
    `fusion_ranks: {path: rank}` for the paths it appeared in.
    """

    def __init__(
        self,
        paths: list[str],
        mode: str = "rrf",
        rrf_k: float = 60,
        weights: dict[str, float] | None = None,
        min_scores: dict[str, float] | None = None,
        path_languages: dict[str, list[str]] | None = None,
        unfit_weight: float = 0.0,
        agreement_bonus: float = 0.0,
        top_k: int | None = None,
        confidence: str | None = None,
        confidence_strength: float = 0.0,
    ) -> None:
        """
        :param paths: Names of the retrieval paths; each becomes an input socket of type `list[Document]`.
        :param mode: "rrf", "dbsf", "merge" or "concatenate".
        :param rrf_k: RRF rank constant (> 0); 60 with 1-based ranks equals DocumentJoiner's 61 with 0-based.
        :param weights: Weight per path (default 1.0 each, must be >= 0).
        :param min_scores: Minimum score per path; documents below it (or without a score) are dropped.
        :param path_languages: Query languages ("en", "zh") each path serves well.
        :param unfit_weight: Weight multiplier (>= 0) for a path whose languages do not include the query's.
        :param agreement_bonus: dbsf only: share (>= 0) of a document's other paths' scores added to its best.
        :param top_k: Maximum number of fused documents; None keeps all.
        :param confidence: None, "gap" or "entropy": the per-query confidence signal that scales path weights.
        :param confidence_strength: Exponent (>= 0) of that scaling; 0 keeps the static weights.
        """
        paths = _checked_paths(paths)
        check_fusion_settings(mode, rrf_k, unfit_weight, agreement_bonus, top_k, confidence, confidence_strength)
        _check_per_path(paths, weights, min_scores, path_languages)
        self.paths = paths
        self.mode = mode
        self.rrf_k = rrf_k
        self.weights = {path: float(weight) for path, weight in weights.items()} if weights else None
        self.min_scores = {path: float(score) for path, score in min_scores.items()} if min_scores else None
        self.path_languages = (
            {path: list(languages) for path, languages in path_languages.items()} if path_languages else None
        )
        self.unfit_weight = unfit_weight
        self.agreement_bonus = agreement_bonus
        self.top_k = top_k
        self.confidence = confidence
        self.confidence_strength = confidence_strength
        for path in paths:
            component.set_input_type(self, path, list[Document], default=[])
        component.set_input_type(self, DEGRADED, Variadic[list[str]], default=[])

    def to_dict(self) -> dict[str, Any]:
        """Serialise the component."""
        return default_to_dict(
            self,
            paths=self.paths,
            mode=self.mode,
            rrf_k=self.rrf_k,
            weights=self.weights,
            min_scores=self.min_scores,
            path_languages=self.path_languages,
            unfit_weight=self.unfit_weight,
            agreement_bonus=self.agreement_bonus,
            top_k=self.top_k,
            confidence=self.confidence,
            confidence_strength=self.confidence_strength,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "RankFusionJoiner":
        """Deserialise the component."""
        return default_from_dict(cls, data)

    def _path_weights(self, query: str | None) -> dict[str, float]:
        """Configured weights, scaled by `unfit_weight` for paths that do not serve the query's language."""
        weights = {path: (self.weights or {}).get(path, 1.0) for path in self.paths}
        if query and self.path_languages:
            language = detect_language(query)
            for path, languages in self.path_languages.items():
                if language not in languages:
                    weights[path] *= self.unfit_weight
        return weights

    def _kept(self, path: str, documents: list[Document]) -> list[Document]:
        """The path's ranked list without repeated ids and without documents below its minimum score."""
        floor = (self.min_scores or {}).get(path)
        seen: set[str] = set()
        kept = []
        for doc in documents:
            if doc.id in seen or (floor is not None and (doc.score is None or doc.score < floor)):
                continue
            seen.add(doc.id)
            kept.append(doc)
        return kept

    def _rrf(self, lists: dict[str, list[Document]], weights: dict[str, float]) -> list[Document]:
        """Weighted reciprocal rank fusion over 1-based ranks; the first path a document appears in supplies it."""
        scores: dict[str, float] = {}
        documents: dict[str, Document] = {}
        for path, docs in lists.items():
            for rank, doc in enumerate(docs, start=1):
                scores[doc.id] = scores.get(doc.id, 0.0) + weights[path] / (self.rrf_k + rank)
                documents.setdefault(doc.id, doc)
        return [replace(doc, score=scores[doc_id]) for doc_id, doc in documents.items()]

    def _dbsf(self, lists: dict[str, list[Document]], weights: dict[str, float]) -> list[Document]:
        """Per-path rescaled scores, weighted; each document gets its best path plus agreement_bonus times the rest."""
        scores: dict[str, list[float]] = {}
        documents: dict[str, Document] = {}
        for path, docs in lists.items():
            for doc, score in zip(docs, _rescale(docs), strict=True):
                scores.setdefault(doc.id, []).append(weights[path] * score)
                documents.setdefault(doc.id, doc)
        fused = []
        for doc_id, doc in documents.items():
            best = max(scores[doc_id])
            fused.append(replace(doc, score=best + self.agreement_bonus * (sum(scores[doc_id]) - best)))
        return fused

    @component.output_types(documents=list[Document], degraded=list[str])
    def run(
        self, query: str | None = None, top_k: int | None = None, **paths: Any
    ) -> dict[str, list[Any]]:
        """
        Fuse the lists received on the path sockets.

        :param query: The query, used for the language fit of `path_languages`; None skips that check.
        :param top_k: Maximum number of documents; overrides the init value, 0 returns none.
        :param paths: One ranked document list per path name, and under `degraded` the lists of failed paths.
        :returns: `documents`: fused copies, best first, with `meta["fusion_ranks"]`; `degraded`: the paths that
            failed for this request.
        :raises RuntimeError: when every path failed.
        """
        failed = {path for names in paths.pop(DEGRADED, None) or [] for path in names}
        degraded = [path for path in self.paths if path in failed]
        if len(degraded) == len(self.paths):
            raise RuntimeError(f"every retrieval path failed for this request: {', '.join(degraded)}")
        unknown = sorted((set(paths) | failed) - set(self.paths))
        if unknown:
            raise ValueError(
                f"RankFusionJoiner got documents for unknown paths {unknown}; paths: {self.paths}"
            )
        top_k = self.top_k if top_k is None else top_k
        if top_k is not None and top_k < 0:
            raise ValueError(f"top_k must be >= 0, got {top_k}")
        weights = self._path_weights(query)
        lists = {
            path: kept
            for path in self.paths
            if weights[path] > 0 and (kept := self._kept(path, paths.get(path) or []))
        }
        if not lists:
            return {"documents": [], "degraded": degraded}
        if self.confidence and self.confidence_strength:
            weights = {
                path: weight * (0.1 + path_confidence(lists[path], self.confidence)) ** self.confidence_strength
                if path in lists else weight
                for path, weight in weights.items()
            }
        ranks: dict[str, dict[str, int]] = {}
        for path, docs in lists.items():
            for rank, doc in enumerate(docs, start=1):
                ranks.setdefault(doc.id, {})[path] = rank

        if self.mode == "rrf":
            fused = self._rrf(lists, weights)
        elif self.mode == "dbsf":
            fused = self._dbsf(lists, weights)
        else:
            joiner = DocumentJoiner(
                join_mode=MODES[self.mode],
                weights=[weights[path] for path in lists] if self.mode == "merge" else None,
                sort_by_score=False,
            )
            fused = joiner.run(documents=list(lists.values()))["documents"]

        fused.sort(
            key=lambda doc: (
                -doc.score if doc.score is not None else inf,
                min(ranks[doc.id].values()),
                doc.id,
            )
        )
        return {
            "documents": [
                replace(doc, meta={**doc.meta, "fusion_ranks": ranks[doc.id]}) for doc in fused[:top_k]
            ],
            "degraded": degraded,
        }
