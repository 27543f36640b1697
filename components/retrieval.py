"""Pieces both retrievers share: argument checks, filter masks and top-k selection over a score array."""

import json
import threading
from typing import Any

import numpy as np
from haystack import Document
from haystack.utils.filters import document_matches_filter

MAX_CACHED_MASKS = 128


def check_document_store(document_store: Any) -> None:
    """Fail at construction, not at warm-up, when `document_store` is not a DocumentStore."""
    if not callable(getattr(document_store, "filter_documents", None)):
        raise TypeError(
            "document_store must be a Haystack DocumentStore (it needs filter_documents()), "
            f"got {type(document_store).__name__}"
        )


def check_top_k(top_k: int, allow_zero: bool) -> None:
    """Reject top_k values a retriever cannot honour."""
    if top_k < 0 or (top_k == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"top_k must be {bound}, got {top_k}")


class DocumentMasks:
    """Boolean masks over the indexed documents, one per filter.

    Filters are applied as a mask before ranking so a filtered-out document can never be returned, however
    large top_k is. Masks are cached because ACL/tenant filters repeat across queries and evaluating a
    filter costs one Python call per document.
    """

    def __init__(self, documents: list[Document]) -> None:
        self._documents = documents
        self._cache: dict[str, np.ndarray] = {}
        self._lock = threading.Lock()

    def mask(self, filters: dict[str, Any]) -> np.ndarray:
        """Return which documents match `filters` (Haystack filter syntax)."""
        key = json.dumps(filters, sort_keys=True, default=repr)
        with self._lock:
            cached = self._cache.get(key)
        if cached is not None:
            return cached
        mask = np.fromiter(
            (document_matches_filter(filters, doc) for doc in self._documents),
            dtype=bool,
            count=len(self._documents),
        )
        mask.flags.writeable = False  # shared by every query with these filters
        with self._lock:
            if len(self._cache) >= MAX_CACHED_MASKS:
                self._cache.pop(next(iter(self._cache)))
            self._cache[key] = mask
        return mask


def top_indices(scores: np.ndarray, top_k: int, floor: float) -> np.ndarray:
    """Return the indices of the top_k scores above `floor`, best first.

    Partitioning the scores above the floor finds the k-th best without sorting the corpus (and without
    the slow path numpy's partition takes on masses of equal zeros); every score tied with it is kept until
    the final sort, so ties always go to the lower index (documents are sorted by id).
    """
    above = scores > floor
    values = scores[above]
    if len(values) > top_k:
        above &= scores >= np.partition(values, len(values) - top_k)[len(values) - top_k]
    candidates = np.flatnonzero(above)
    return candidates[np.lexsort((candidates, -scores[candidates]))][:top_k]
