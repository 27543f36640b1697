"""What a per-user tenant/ACL filter adds to a query, printed as JSON.

    python -m benchmarks.bench_filters [--chunks 100000] [--principals 200] [--tenants 100] [--groups 20]

Every principal is new, so no mask is cached: each query pays for its principal's filter in full. Chunks are
synthetic (random words; 10 % public, 30 % of the rest behind an ACL of 1-2 groups) and the dense vectors random
unit vectors: what a filter costs depends on how many chunks there are, not on what they say.
1. warm-up: building the per-field value index (meta.tenant, meta.acl) over all chunks;
2. the mask alone: serving.principals.visible_filter(principal) answered from that index, vs evaluating the
   same filter chunk by chunk with Haystack's document_matches_filter (what ragtune did before);
3. BM25 and dense queries through the retrievers, with and without the principal's filter: the difference is
   what the filter adds. Target: at most 1 ms at 100k chunks.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Sequence

import numpy as np
from haystack import Document
from haystack.document_stores.in_memory import InMemoryDocumentStore
from haystack.utils.filters import document_matches_filter

from benchmarks.common import machine, percentiles, timed
from components.retrievers.bm25_retriever import BM25sRetriever
from components.retrievers.document_masks import ACCESS_FIELDS, DocumentMasks
from components.retrievers.embedding_retriever import MatrixEmbeddingRetriever
from serving.principals import Principal, visible_filter

WORDS = [f"w{i}" for i in range(5000)]
DIMENSION = 384


def chunks(count: int, tenants: int, groups: int, rng: random.Random) -> list[Document]:
    vectors = np.random.default_rng(0).standard_normal((count, DIMENSION)).astype(np.float32)
    documents = []
    for i in range(count):
        meta: dict = {}
        if rng.random() >= 0.1:
            meta["tenant"] = f"t{rng.randrange(tenants)}"
            if rng.random() < 0.3:
                meta["acl"] = [f"g{g}" for g in rng.sample(range(groups), rng.randint(1, 2))]
        text = " ".join(rng.choices(WORDS, k=40))
        documents.append(Document(id=f"c{i:07d}", content=text, meta=meta, embedding=vectors[i].tolist()))
    return documents


def principals(count: int, tenants: int, groups: int, rng: random.Random) -> list[Principal]:
    return [
        Principal(f"t{rng.randrange(tenants)}", tuple(f"g{g}" for g in rng.sample(range(groups), rng.randint(0, 3))))
        for _ in range(count)
    ]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--principals", type=int, default=200)
    parser.add_argument("--tenants", type=int, default=100)
    parser.add_argument("--groups", type=int, default=20)
    parser.add_argument("--per-document", type=int, default=5, help="principals timed on the chunk-by-chunk path")
    args = parser.parse_args(argv)
    rng = random.Random(0)
    documents = chunks(args.chunks, args.tenants, args.groups, rng)
    users = principals(args.principals, args.tenants, args.groups, rng)

    start = time.perf_counter()
    masks = DocumentMasks(documents, ACCESS_FIELDS)
    warm_up_ms = (time.perf_counter() - start) * 1000
    mask_ms = [timed(masks.mask, visible_filter(p)) for p in users]
    per_document_ms = [
        timed(lambda f: [document_matches_filter(f, d) for d in documents], visible_filter(p))
        for p in users[: args.per_document]
    ]

    store = InMemoryDocumentStore()
    store.write_documents(documents)
    bm25, dense = BM25sRetriever(store, top_k=50), MatrixEmbeddingRetriever(store, top_k=50)
    bm25.warm_up()
    dense.warm_up()
    figures = {}
    vectors = np.random.default_rng(1)
    for name, retriever, make_query in (
        ("bm25", bm25, lambda: {"query": " ".join(rng.choices(WORDS, k=6))}),
        ("dense", dense, lambda: {"query_embedding": vectors.standard_normal(DIMENSION).tolist()}),
    ):
        plain, filtered = [], []
        for user in users:  # alternated, so drift in machine load hits both alike
            query = make_query()
            plain.append(timed(retriever.run, **query))
            filtered.append(timed(retriever.run, **query, filters=visible_filter(user)))
        p_plain, p_filtered = percentiles(plain), percentiles(filtered)
        figures[name] = {
            "unfiltered": p_plain,
            "filtered": p_filtered,
            "added_p50_ms": round(p_filtered["p50_ms"] - p_plain["p50_ms"], 3),
            "added_p95_ms": round(p_filtered["p95_ms"] - p_plain["p95_ms"], 3),
        }
    visible = [int(masks.mask(visible_filter(p)).sum()) for p in users]
    print(json.dumps({
        "machine": machine(),
        "chunks": args.chunks,
        "tenants": args.tenants,
        "groups": args.groups,
        "visible_chunks_per_principal_mean": round(float(np.mean(visible)), 1),
        "index_warm_up_ms": round(warm_up_ms, 1),
        "mask_from_index": percentiles(mask_ms),
        "mask_per_document": percentiles(per_document_ms),
        "query": figures,
        "target_added_ms": 1.0,
    }, indent=2))


if __name__ == "__main__":
    sys.exit(main())
