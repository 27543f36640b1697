"""BM25 retrieval over any Haystack DocumentStore, scored by bm25s instead of the store's own engine."""

import hashlib
import json
import os
import shutil
import tempfile
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import bm25s
from haystack import Document, component, default_from_dict, default_to_dict, logging
from haystack.document_stores.types import DocumentStore, FilterPolicy
from tqdm import tqdm

from components.common.text import Tokenizer
from components.retrievers.bm25_scores import BM25Scores
from components.retrievers.document_masks import DocumentMasks
from components.retrievers.retrieval import (
    check_document_store,
    check_top_k,
    effective_filters,
    filter_policy_of,
    stored_rows,
    top_indices,
)

logger = logging.getLogger(__name__)

METHODS = ("robertson", "lucene", "atire", "bm25l", "bm25+")
PROGRESS_MIN_DOCS = 5000
DOC_IDS_FILE = "doc_ids.json"


def corpus_digest(ids: Sequence[str], contents: Sequence[str]) -> str:
    """Hash ids and contents, so a cached index is reused only for exactly the same corpus."""
    digest = hashlib.blake2b(digest_size=16)
    for doc_id, content in zip(ids, contents, strict=True):
        digest.update(doc_id.encode("utf-8"))
        digest.update(b"\x00")
        digest.update(content.encode("utf-8"))
        digest.update(b"\x01")
    return digest.hexdigest()


def term_ids(tokenizer: Tokenizer, texts: Iterable[str]) -> tuple[list[array], dict[str, int]]:
    """Each text's terms as ids into the returned vocabulary, one int32 array per text: what the BM25 index is
    built from. Terms as Python strings would cost ~50 bytes each (gigabytes at a million chunks); an id costs 4.
    (Not a Tokenizer method: any edit to components/common/text.py rebuilds every cached BM25 index.)"""
    vocabulary: dict[str, int] = {}
    ids = [array("i", [vocabulary.setdefault(t, len(vocabulary)) for t in tokenizer.tokenize(text)]) for text in texts]
    return ids, vocabulary


@component
class BM25sRetriever:
    """
    Keyword retrieval with bm25s over the documents of any Haystack DocumentStore.

    Haystack's InMemoryBM25Retriever only works with its own store and tokenises by whitespace regex; this one
    reads any store once in `warm_up()`, tokenises with the shared `Tokenizer` (jieba for Chinese) and scores
    queries with a precomputed sparse matrix (its commonest terms also as dense rows, `BM25Scores`), so a query
    costs about a millisecond at 100k chunks and a few at 1M.
    Documents without any query term are never returned.

    ### Usage example
    ```python
    retriever = BM25sRetriever(document_store=store, top_k=5)
    retriever.warm_up()
    retriever.run(query="hybrid retrieval")["documents"]
    ```
    """

    def __init__(
        self,
        document_store: DocumentStore,
        top_k: int = 10,
        k1: float = 1.5,
        b: float = 0.75,
        method: str = "lucene",
        language: str = "auto",
        stopwords: str | None = None,
        index_dir: str | None = None,
        filters: dict[str, Any] | None = None,
        filter_policy: str | FilterPolicy = FilterPolicy.MERGE,
    ) -> None:
        """
        :param document_store: The store whose documents are indexed (read once, in `warm_up()`).
        :param top_k: Default number of documents to return; must be > 0.
        :param k1: BM25 term-frequency saturation; must be >= 0.
        :param b: BM25 length normalisation, between 0 and 1.
        :param method: bm25s scoring variant: "robertson", "lucene", "atire", "bm25l" or "bm25+".
        :param language: Tokenizer language: "auto", "en", "zh" or "mixed" (see `components.common.text.Tokenizer`).
        :param stopwords: None, or "en" to drop English stopwords.
        :param index_dir: Folder where built indexes are cached, keyed by settings and corpus; None disables it.
        :param filters: Filters every query applies, e.g. a deployment's `meta.lang == "en"`.
        :param filter_policy: "merge" (default): a query's filters are ANDed with `filters`, so they can only narrow
            them; "replace": a query's filters take their place (Haystack's default).
        """
        check_document_store(document_store)
        check_top_k(top_k, allow_zero=False)
        if k1 < 0:
            raise ValueError(f"k1 must be >= 0, got {k1}")
        if not 0 <= b <= 1:
            raise ValueError(f"b must be between 0 and 1, got {b}")
        if method not in METHODS:
            raise ValueError(f"method must be one of {list(METHODS)}, got {method!r}")
        self.document_store = document_store
        self.top_k = top_k
        self.k1 = k1
        self.b = b
        self.method = method
        self.language = language
        self.stopwords = stopwords
        self.index_dir = index_dir
        self.filter_policy = filter_policy_of(filter_policy, filters)
        self.filters = filters
        self._tokenizer = Tokenizer(language=language, stopwords=stopwords)
        self._documents: Sequence[Document] = []
        self._scores: BM25Scores | None = None
        self._masks = DocumentMasks([])
        self._is_warmed_up = False

    def warm_up(self) -> None:
        """Read the store and build (or load from `index_dir`) the BM25 index; later calls do nothing."""
        if self._is_warmed_up:
            return
        rows = stored_rows(self.document_store)
        documents = rows.documents
        # One pass over the documents (a store may decode each one as it is read), then only their texts.
        ids, contents = [], []
        for doc in documents:
            ids.append(doc.id)
            contents.append(doc.content or "")
        if self.index_dir is None:
            bm25 = self._build(contents)
        else:
            bm25 = self._load_or_build(ids, contents, Path(self.index_dir))
        self._scores = None if bm25 is None else BM25Scores(bm25)
        self._documents = documents
        self._masks = rows.masks
        self._is_warmed_up = True

    def _build(self, contents: list[str]) -> bm25s.BM25 | None:
        """Tokenise and index the documents' `contents`; None when they hold no term at all (every query then
        returns [])."""
        ids, vocabulary = term_ids(
            self._tokenizer,
            tqdm(
                contents,
                total=len(contents),
                desc="BM25 tokenise",
                disable=len(contents) <= PROGRESS_MIN_DOCS,
            )
        )
        if not vocabulary:
            logger.warning("BM25sRetriever found no terms in {count} documents", count=len(contents))
            return None
        logger.info("BM25sRetriever indexing {count} documents", count=len(contents))
        bm25 = bm25s.BM25(k1=self.k1, b=self.b, method=self.method)
        bm25.index((ids, vocabulary), show_progress=False)
        return bm25

    def _cache_key(self, ids: list[str], contents: list[str]) -> str:
        """Name the cached index after everything that changes its content."""
        settings = {
            "k1": self.k1,
            "b": self.b,
            "method": self.method,
            "tokenizer": self._tokenizer.identity(),
            "bm25s": bm25s.__version__,
            "count": len(ids),
            "corpus": corpus_digest(ids, contents),
        }
        return hashlib.sha256(json.dumps(settings, sort_keys=True).encode("utf-8")).hexdigest()[:20]

    def _load_or_build(self, doc_ids: list[str], contents: list[str], index_dir: Path) -> bm25s.BM25 | None:
        """Load the cached index for this corpus and these settings, or build and publish it atomically."""
        target = index_dir / f"bm25s-{self._cache_key(doc_ids, contents)}"
        if target.exists():
            return self._load(target, doc_ids)
        bm25 = self._build(contents)
        index_dir.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".bm25s-tmp-", dir=index_dir))
        try:
            if bm25 is not None:
                bm25.save(staging, show_progress=False)
            (staging / DOC_IDS_FILE).write_text(json.dumps(doc_ids, ensure_ascii=False), encoding="utf-8")
            os.rename(staging, target)
            logger.info("BM25sRetriever saved its index to {path}", path=str(target))
        except OSError:
            if not target.exists():
                raise
            # A parallel job published the same index first; its content equals ours.
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return bm25

    @staticmethod
    def _load(target: Path, doc_ids: list[str]) -> bm25s.BM25 | None:
        """Load a published index, checking it was built over exactly these documents in this order."""
        saved_ids = json.loads((target / DOC_IDS_FILE).read_text(encoding="utf-8"))
        if saved_ids != doc_ids:
            raise RuntimeError(f"BM25 index at {target} was built for other documents; delete the folder")
        logger.info("BM25sRetriever loaded its index from {path}", path=str(target))
        if not (target / "params.index.json").exists():
            return None
        return bm25s.BM25.load(target, show_progress=False)

    def tokenizer_identity(self) -> dict[str, str]:
        """Describe the tokeniser, for MLflow."""
        return self._tokenizer.identity()

    def to_dict(self) -> dict[str, Any]:
        """Serialise the component; the store is serialised with its own `to_dict()`."""
        return default_to_dict(
            self,
            document_store=self.document_store,
            top_k=self.top_k,
            k1=self.k1,
            b=self.b,
            method=self.method,
            language=self.language,
            stopwords=self.stopwords,
            index_dir=self.index_dir,
            filters=self.filters,
            filter_policy=self.filter_policy.value,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "BM25sRetriever":
        """Deserialise the component; the store is rebuilt with its own `from_dict()`."""
        return default_from_dict(cls, data)

    @component.output_types(documents=list[Document])
    def run(
        self, query: str, top_k: int | None = None, filters: dict[str, Any] | None = None
    ) -> dict[str, list[Document]]:
        """
        Return the best-scoring documents for `query`.

        :param query: The query text; one without any indexed term returns no documents.
        :param top_k: Maximum number of documents; overrides the init value, 0 returns none.
        :param filters: Haystack metadata filters; non-matching documents are excluded before ranking. Combined
            with the init-time filters by `filter_policy`.
        :returns: `documents`: copies of the stored documents (without embedding) with `score` = BM25 score,
            best first, all with score > 0.
        """
        top_k = self.top_k if top_k is None else top_k
        check_top_k(top_k, allow_zero=True)
        self.warm_up()
        if self._scores is None or top_k == 0:
            return {"documents": []}
        token_ids = self._scores.token_ids(self._tokenizer.tokenize(query))
        if not token_ids:
            return {"documents": []}
        scores = self._scores(token_ids)
        filters = effective_filters(self.filter_policy, self.filters, filters)
        if filters:
            scores *= self._masks.mask(filters)
        best = top_indices(scores, top_k, floor=0.0, sample=self._scores.rarest_postings(token_ids, top_k))
        return {"documents": [replace(self._documents[i], score=float(scores[i])) for i in best.tolist()]}
