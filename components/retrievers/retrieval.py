"""Pieces both retrievers share: argument checks, the filter policy and top-k selection over a score array."""

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from haystack import Document
from haystack.document_stores.types import DocumentStore, FilterPolicy

from components.retrievers.document_masks import ACCESS_FIELDS, DocumentMasks, check_filters


@dataclass(frozen=True)
class StoredRows:
    """What the retrievers search: a store's documents in id order (ties go to the lower id), without vectors,
    their vectors as one (documents x dimension) matrix aligned with them (None when none has one), and masks
    over them for filters."""

    documents: Sequence[Document]
    embeddings: np.ndarray | None
    masks: DocumentMasks
    unembedded: str | None = None  # the first document without a vector, when others have one


def keeps_rows(document_store: DocumentStore) -> bool:
    """Whether the store keeps its own rows (`stored_rows()`), so it is read whole without a list per vector."""
    return callable(getattr(document_store, "stored_rows", None))


def stored_rows(document_store: DocumentStore) -> StoredRows:
    """The store's own rows when it keeps them (pipelines/index/compact_store.py: shared by every retriever over
    it, mapped from the snapshot), else read from `filter_documents()` and stacked here."""
    if keeps_rows(document_store):
        return document_store.stored_rows()
    stored = sorted(document_store.filter_documents(), key=lambda doc: doc.id)
    matrix, unembedded = stack_vectors([doc.id for doc in stored], [doc.embedding for doc in stored])
    documents = [replace(doc, embedding=None) for doc in stored]
    return StoredRows(documents, matrix, DocumentMasks(documents, ACCESS_FIELDS), unembedded)


def stack_vectors(ids: Sequence[str], vectors: Sequence[Any]) -> tuple[np.ndarray | None, str | None]:
    """The vectors as one float32 matrix and None, or None and the first id without a vector when some have one
    (None, None when none has); a vector of another dimension than those before it fails, naming its document."""
    missing = next((doc_id for doc_id, vector in zip(ids, vectors, strict=True) if vector is None), None)
    if missing is not None or not vectors:
        return None, missing if any(vector is not None for vector in vectors) else None
    dimension = len(vectors[0])
    for doc_id, vector in zip(ids, vectors, strict=True):
        if len(vector) != dimension:
            raise ValueError(
                f"Document {doc_id!r} has an embedding of dimension {len(vector)}, "
                f"the documents before it have dimension {dimension}"
            )
    return np.asarray(vectors, dtype=np.float32), None


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


def filter_policy_of(policy: str | FilterPolicy, filters: dict[str, Any] | None) -> FilterPolicy:
    """Check the init-time filters and their policy when the retriever is built, not at its first query."""
    if filters is not None:
        check_filters(filters)
    return policy if isinstance(policy, FilterPolicy) else FilterPolicy.from_str(policy)


def effective_filters(
    policy: FilterPolicy, init_filters: dict[str, Any] | None, runtime_filters: dict[str, Any] | None
) -> dict[str, Any] | None:
    """MERGE always ANDs the two, so a request can only narrow the init-time filters.

    Haystack's `apply_filter_policy` keeps only the runtime filter when both compare the same field, or when their
    logical operators differ, so there `meta.tenant == b` at run time replaces an init-time `meta.tenant == a`.
    """
    if policy == FilterPolicy.MERGE and init_filters and runtime_filters:
        return {"operator": "AND", "conditions": [init_filters, runtime_filters]}
    return runtime_filters or init_filters


def top_indices(scores: np.ndarray, top_k: int, floor: float, sample: np.ndarray | None = None) -> np.ndarray:
    """Return the indices of the top_k scores above `floor`, best first.

    Partitioning the scores above the floor finds the k-th best without sorting the corpus (and without
    the slow path numpy's partition takes on masses of equal zeros); every score tied with it is kept until
    the final sort, so ties always go to the lower index (documents are sorted by id).

    `sample`: indices of at least top_k documents, e.g. those holding a query's rarest term. The k-th best score
    among them cannot beat the k-th best of all, so only scores at or above it are partitioned: the same result,
    without partitioning a corpus in which most documents score (at 1M chunks, p95 45 -> 9 ms on a loaded VM).
    """
    above = scores > floor
    if sample is not None and len(sample) >= top_k > 0:
        sampled = scores[sample]
        above &= scores >= np.partition(sampled, len(sampled) - top_k)[len(sampled) - top_k]
    values = scores[above]
    if len(values) > top_k:
        above &= scores >= np.partition(values, len(values) - top_k)[len(values) - top_k]
    candidates = np.flatnonzero(above)
    return candidates[np.lexsort((candidates, -scores[candidates]))][:top_k]


def scoped_search(
    policy: FilterPolicy,
    init_filters: dict[str, Any] | None,
    default_top_k: int,
    filters: dict[str, Any] | None,
    top_k: int | None,
    rewrite: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> dict[str, Any] | None:
    """A query's `filters` and `top_k` under every retriever's contract (merge only narrows), as search arguments;
    None when top_k is 0, so that nothing is asked for. `rewrite` puts the filters in the form a store's own
    translation reads as we do (`components/retrievers/weaviate_search.py`)."""
    top_k = default_top_k if top_k is None else top_k
    check_top_k(top_k, allow_zero=True)
    if top_k == 0:
        return None
    effective = effective_filters(policy, init_filters or None, filters)
    if rewrite is not None and effective is not None:
        effective = rewrite(effective)
    return {"filters": effective, "top_k": top_k}
