"""The run's config groups as typed records (`retriever`, `ingest`, `selfcheck`, `mlflow`).

conf/ extends them (Hydra's ConfigStore, experiments/runs/config.py), so a default is written once, here, with
what it means; docs/config.md is generated from these and the YAML files.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any, ClassVar

from haystack.document_stores.types import FilterPolicy as HaystackFilterPolicy
from omegaconf import MISSING

from components.crag.crag_evaluator import KEEPS
from components.joiners.rank_fusion_joiner import (
    CONFIDENCE_SIGNALS,
    MODES,
    FusionSettingError,
    check_fusion_settings,
)
from components.retrievers.bm25_retriever import METHODS
from components.retrievers.embedding_retriever import SIMILARITIES
from pipelines.choices import choices
from pipelines.errors import ConfigError, require
from pipelines.fusion_fit import KINDS as FIT_KINDS

Bm25Method = choices("Bm25Method", METHODS)
FusionMode = choices("FusionMode", list(MODES))
FusionConfidence = choices("FusionConfidence", CONFIDENCE_SIGNALS)
FitQueries = choices("FitQueries", FIT_KINDS)
FusionFitMode = choices("FusionFitMode", ("auto",))
FilterPolicy = choices("FilterPolicy", sorted(policy.value for policy in HaystackFilterPolicy))
SimilarityFunction = choices("SimilarityFunction", SIMILARITIES)
CragAction = choices("CragAction", ("refuse", "search"))
CorrectKeeps = choices("CorrectKeeps", KEEPS)


@dataclass
class Bm25Settings:
    # Term-frequency saturation: higher lets a repeated term count for longer.
    k1: float = 1.5
    # Length normalisation: 0 ignores chunk length, 1 normalises fully.
    b: float = 0.75
    # bm25s's scoring variant.
    method: Bm25Method = Bm25Method.lucene  # type: ignore[valid-type,attr-defined]
    # en: English stopwords removed; null: keep all tokens.
    stopwords: str | None = None


@dataclass
class FusionSettings:
    # dbsf is score-aware, rrf rank-only; merge and concatenate are DocumentJoiner's. Measurements: docs/results/.
    mode: FusionMode = FusionMode.dbsf  # type: ignore[valid-type,attr-defined]
    # dbsf: share of a document's other paths' rescaled scores added to its best path's. This and the dense weight
    # depend on how good the dense path is, so an embedder config may set its own (models.embedder.fusion).
    agreement_bonus: float = "${oc.select:models.embedder.fusion.agreement_bonus,0.2}"  # type: ignore[assignment]
    # rrf: rank constant k in weight / (k + rank).
    rrf_k: float = 60.0
    # Per-path weight; the dense one may come from the embedder config (models.embedder.fusion.dense_weight).
    weights: dict[str, float] = field(
        default_factory=lambda: {"bm25": 1.0, "dense": "${oc.select:models.embedder.fusion.dense_weight,1.0}"}  # type: ignore[dict-item]
    )
    # Per-path minimum score before fusion: a path with no real match adds nothing.
    min_scores: dict[str, float] = field(default_factory=lambda: {"bm25": 0.0, "dense": 0.0})
    # Weight multiplier for the dense path when the query's language is not in models.embedder.languages.
    unfit_weight: float = 0.0
    # Query-adaptive weights: null | gap | entropy, each path's weight times (0.1 + its confidence) ** strength.
    # Off: across seven sets it never held the 2 % rule better than the static default
    # (docs/results/2026-12-01-fusion-loso-e5.md).
    confidence: FusionConfidence | None = None  # type: ignore[valid-type]
    # The exponent of the confidence weighting; 0 turns it off.
    confidence_strength: float = 0.0
    # auto: fit the dense weight to this corpus at index time, from pseudo-queries made of its own chunks (no labels;
    # pipelines/fusion_fit.py), cached with the index and logged as fusion/fit/* params. null: the weights above.
    fit: FusionFitMode | None = None
    # The pseudo-queries: sentence (a chunk's longest sentence) | half (its first half).
    fit_queries: FitQueries = FitQueries.sentence  # type: ignore[valid-type,attr-defined]

    def check(self) -> None:
        """The joiner's own checks, run before anything is built so that the error names the config key."""
        try:
            check_fusion_settings(self.mode, self.rrf_k, self.unfit_weight, self.agreement_bonus, None,
                                  self.confidence, self.confidence_strength)
        except FusionSettingError as e:
            raise ConfigError(f"config key 'retriever.fusion.{e.parameter}': {e.rule}") from None


@dataclass
class PathSettings:
    # Seconds this path (its query embedder included) may take per request; one that takes longer, or fails, is
    # dropped for that request and fusion ranks the other paths (the reply's `degraded`). null: no limit, so only
    # a failure drops it. A timeout runs the path in a worker thread, and an endpoint's own `timeout` already
    # bounds a remote embedder, so no path has one by default.
    timeout_s: float | None = None


@dataclass
class RetrieverSettings:
    # Final number of retrieved chunks.
    top_k: int = 20
    # Chunks each path (BM25, dense) hands to fusion.
    candidates: int = 50
    # Filters every retriever applies before ranking, e.g. {field: meta.lang, operator: "==", value: en}: a Haystack
    # filter, checked by the retrievers when they are built.
    filters: Any = None
    # merge: a request's filters (a golden item's, or the server's tenant scope) are ANDed with `filters`, so they
    # only narrow; replace: a request's filters take their place.
    filter_policy: FilterPolicy = FilterPolicy.merge
    bm25: Bm25Settings = field(default_factory=Bm25Settings)
    fusion: FusionSettings = field(default_factory=FusionSettings)
    # Per retrieval path of a hybrid (bm25, dense): e.g. retriever.paths.dense.timeout_s=2. A path that fails or
    # times out is dropped for the request; when every path fails, the request fails.
    paths: dict[str, PathSettings] = field(default_factory=lambda: {"bm25": PathSettings(), "dense": PathSettings()})

    def check(self) -> None:
        require(self.top_k > 0, "retriever.top_k", "must be > 0")
        require(self.candidates > 0, "retriever.candidates", "must be > 0")
        for name, path in self.paths.items():
            require(path.timeout_s is None or path.timeout_s > 0, f"retriever.paths.{name}.timeout_s",
                    "must be null or > 0")


@dataclass
class IngestSettings:
    """Each conf/ingest/ option names its chunking and its splitter chain; the sizes are shared."""

    # The chunking's name, as logged (the option's).
    name: str = MISSING
    # Characters per chunk, at most.
    chunk_size: int = 500
    # Characters a chunk shares with the one before it (fewer than chunk_size).
    chunk_overlap: int = 50
    # Literal strings (not regexes), tried in order; each stays at the end of the piece before it.
    separators: list[str] = field(default_factory=list)
    # Prefix each chunk with its markdown heading path ("A > B") before embedding and BM25.
    heading_prefix: bool = False
    # Index snapshots, one folder per index fingerprint (`ragtune cache list` shows them).
    cache_dir: str = "${paths.cache}/index"
    # A corpus that changed since an index of these settings was built: take that index's chunks for the documents
    # that did not change and ingest only the rest (same result and fingerprint as a cold build).
    update: bool = False
    # Splitters run in this order; each is named under `splitters`.
    chain: list[str] = MISSING
    # Name -> a Haystack component config.
    splitters: dict[str, Any] = field(default_factory=dict)
    # Non-blank characters a chunk needs; a shorter one joins its neighbour in its document (after any splitter,
    # which also never cuts a code block or table: one longer than max_chunk_size is cut between rows, its header
    # repeated). 0: no minimum. sentence_window: 20, semantic: 100, its splitter's min_length too.
    min_chunk_size: int = 0
    # Characters of a chunk ChunkGuard (after any splitter) makes, at most (>= chunk_size): no merge passes it, a
    # block that would is a chunk of its own, a longer one is cut between its lines. null: 3 x chunk_size. 1,500
    # characters are about 350 e5 tokens of English but up to 930 of a Chinese table; for an embedder that truncates
    # (MiniLM at 256 word pieces, e5 from the hub at 512 tokens) set less: at 700, 1 chunk of the shipped Chinese
    # table set passed 512 e5 tokens, against 61 at the default.
    max_chunk_size: int | None = None
    # ingest=semantic: a distance between neighbouring sentence groups' embeddings above this percentile of the
    # document's distances is a cut (Haystack's EmbeddingBasedDocumentSplitter; chunks over chunk_size are cut again).
    percentile: float = 0.95
    # ingest=semantic: sentence units embedded together.
    sentences_per_group: int = 3
    # Small-to-big retrieval: what the answer stage does to each of its top chunks after context_window, before the
    # compressor (a component config). none: nothing; ingest=sentence_window widens each to its sentence window;
    # ingest=parent_child and ingest=hierarchical hand over parent blocks instead.
    expand: Any = "none"
    # Sentences on each side of a hit that ingest=sentence_window's expansion adds.
    window: int = 3
    # Tokens of context the expansion hands on, at most, counted as context/tokens counts them (words; jieba words
    # for Chinese): whole windows or blocks in rank order until the next would pass it (the first is always kept).
    # null: no cap. Only with an expansion (sentence_window, parent_child, hierarchical): without one the context
    # is answer.context_top_k chunks of at most chunk_size characters.
    context_tokens: int | None = None
    # The splitter of `chain` (its only one) whose `parents` output, the blocks above the indexed chunks, goes to a
    # second in-memory store that retrieval never searches and the expansion reads (@parents); null: none.
    # ingest=parent_child and ingest=hierarchical set it (store=weaviate refuses them).
    parents: str | None = None
    # ingest=parent_child: characters per parent block, at most (more than chunk_size; 1500 there, over chunks of
    # 300); each chunk is cut from one. null: not used.
    parent_size: int | None = None
    # ingest=hierarchical: characters per block of each level above the chunks, largest first, each more than the
    # next and the last more than chunk_size ([2000, 800] there, over chunks of 300). null: not used.
    block_sizes: list[int] | None = None
    # ingest=parent_child and hierarchical's expansion: a parent replaces its retrieved chunks when more than this
    # share of its chunks is among the answer stage's top chunks, then the same a level up (Haystack's
    # AutoMergingRetriever). 0: any one chunk brings its parent (ingest=parent_child).
    merge_threshold: float = 0.5

    def check(self) -> None:
        require(self.chunk_size > 0, "ingest.chunk_size", "must be > 0")
        require(0 <= self.min_chunk_size < self.chunk_size, "ingest.min_chunk_size",
                f"must be >= 0 and < ingest.chunk_size ({self.chunk_size})")
        require(self.max_chunk_size is None or self.max_chunk_size >= self.chunk_size, "ingest.max_chunk_size",
                f"must be null or >= ingest.chunk_size ({self.chunk_size})")
        require(0 <= self.percentile <= 1, "ingest.percentile", "must be within [0, 1]")
        require(self.sentences_per_group >= 1, "ingest.sentences_per_group", "must be >= 1")
        require(self.window >= 1, "ingest.window", "must be >= 1")
        require(self.context_tokens is None or self.context_tokens >= 1, "ingest.context_tokens",
                "must be null or >= 1")
        require(self.context_tokens is None or self.expand not in (None, "none"), "ingest.context_tokens",
                f"caps what ingest.expand hands on, and ingest={self.name} expands nothing; leave it null")
        require(0 <= self.merge_threshold < 1, "ingest.merge_threshold", "must be >= 0 and < 1")
        require(self.parent_size is None or self.parent_size > self.chunk_size, "ingest.parent_size",
                f"must be > ingest.chunk_size ({self.chunk_size})")
        sizes = [*(self.block_sizes or []), self.chunk_size]
        require(self.block_sizes != [] and all(a > b for a, b in pairwise(sizes)), "ingest.block_sizes",
                f"must hold one size or more, largest first, each > the next and > ingest.chunk_size ({self.chunk_size})")
        require(self.parents is None or list(self.chain) == [self.parents], "ingest.parents",
                f"must be the only splitter of ingest.chain (its blocks are cut from the documents), not {self.chain}")
        require(0 <= self.chunk_overlap < self.chunk_size, "ingest.chunk_overlap",
                f"must be >= 0 and < ingest.chunk_size ({self.chunk_size})")
        require(bool(self.chain), "ingest.chain", "must name at least one splitter")
        missing = [name for name in self.chain if name not in self.splitters]
        require(not missing, "ingest.chain", f"names splitters {missing} not defined under ingest.splitters")


@dataclass
class SelfCheckSettings:
    # Self-check (answer=llm): an answer whose citations do not support some of its sentences is retried with feedback
    # naming them (prompt.retry_feedback), at most this many times, then refused in the question's language. 0: off.
    max_retries: int = 0

    def check(self) -> None:
        require(self.max_retries >= 0, "selfcheck.max_retries", f"must be an integer >= 0, got {self.max_retries!r}")


@dataclass
class MlflowSettings:
    # null: $MLFLOW_TRACKING_URI when set, else the local store sqlite:///mlruns/mlflow.db (supports the registry).
    tracking_uri: str | None = None
    # null: beside a sqlite store (DB_FOLDER/artifacts); a tracking server keeps its own. Fixed per experiment.
    artifact_root: str | None = None
    # null: the dataset's name (dataset.name, else its folder's name).
    experiment: str | None = None


@dataclass
class StoreSettings:
    # in_memory | weaviate: where the index lives and retrieval runs.
    kind: str = MISSING
    # The document store's factory (a Haystack document store class, or a function returning one).
    _target_: str = MISSING
    # Whether the index lives on a server (never snapshotted here, never read back whole); not a config key.
    server_side: ClassVar[bool] = False


@dataclass
class InMemoryStore(StoreSettings):
    kind: str = "in_memory"
    # Chunks as compact records and vectors as one float32 matrix, mapped from the index snapshot.
    _target_: str = "pipelines.index.compact_store.CompactDocumentStore"
    # How the dense path scores a chunk against the query.
    embedding_similarity_function: SimilarityFunction = SimilarityFunction.cosine


@dataclass
class WeaviateStore(StoreSettings):
    server_side: ClassVar[bool] = True
    kind: str = "weaviate"
    _target_: str = "pipelines.index.weaviate.weaviate_document_store"
    # The server's HTTP URL; null: $WEAVIATE_URL.
    url: str | None = "${oc.env:WEAVIATE_URL,null}"
    # Its gRPC port ($WEAVIATE_GRPC_PORT, else 50051).
    grpc_port: int = "${oc.decode:${oc.env:WEAVIATE_GRPC_PORT,50051}}"  # type: ignore[assignment]
    # The environment variable holding an API key (Weaviate Cloud, or a server with API-key auth); null: none.
    api_key_env: str | None = None
    # Filled in by the run: the index fingerprint, which names the collection <collection_prefix>_<fingerprint>.
    fingerprint: str = "@fingerprint"
    # The collection names' prefix.
    collection_prefix: str = "Ragtune"
    # Filled in by the run: the corpus language as the dataset resolves it (dataset.language, or the detected one).
    language: str = "@language"
    # BM25 tokenisation of `content`; null: by language, word for en, gse_ch (Chinese word segmentation) for zh,
    # trigram for mixed (gse_ch cuts Latin words into letters). gse_ch needs the server started with
    # ENABLE_TOKENIZER_GSE_CH=true, as docker-compose.yml does.
    tokenization: str | None = None


STORE_KINDS: dict[str, type[StoreSettings]] = {"in_memory": InMemoryStore, "weaviate": WeaviateStore}


@dataclass
class CragScorerSettings:
    # The scorer's name, as logged.
    name: str = MISSING
    # Its model (pkg:<pypi package>, a folder, a hub id); null: it needs none.
    model: str | None = None
    # The Haystack component scoring each passage; null: the score each passage arrives with.
    component: Any = None
    # The thresholds fitted on this scorer's scale (crag.upper, crag.lower take them); refit with `ragtune calibrate`.
    upper: float = MISSING
    lower: float = MISSING


@dataclass
class CragSettings:
    scorer: CragScorerSettings = field(default_factory=CragScorerSettings)
    # A passage scoring at or above this is relevant.
    upper: float = "${crag.scorer.upper}"  # type: ignore[assignment]
    # A passage scoring below this is irrelevant.
    lower: float = "${crag.scorer.lower}"  # type: ignore[assignment]
    # Passages graded per question: the answer stage's context.
    top_k: int = "${answer.context_top_k}"  # type: ignore[assignment]
    # When every passage is irrelevant: refuse (in the question's language) | search (as for ambiguous).
    incorrect_action: CragAction = CragAction.refuse
    # What a correct question answers from: relevant (the passages at or above upper) | not_irrelevant (the
    # ambiguous ones too; the answer stage's compressor then keeps the best strips).
    correct_keeps: CorrectKeeps = CorrectKeeps.relevant
    # The retrieval evaluator (a Haystack component config).
    evaluator: Any = MISSING
    # A second, wider retrieval with the keyword query for ambiguous questions: any retriever with `query` and
    # `filters` inputs (another index, or a web-search component online).
    supplementary: Any = MISSING
