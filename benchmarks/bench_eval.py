"""Evaluation-side speed at HaluEval scale, printed as JSON: rank metrics and evidence-quote location.

    python -m benchmarks.bench_eval
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Sequence

from haystack import Document

from experiments.datasets.golden.evidence import locate_evidence
from experiments.datasets.golden.items import GoldenItem, normalise_whitespace
from experiments.evaluation.metrics import aggregate, rank_metrics
from experiments.evaluation.relevance import Judged

KS = (1, 3, 5, 10, 20, 50)


def bench_metrics(items: int = 10_000, depth: int = 50) -> dict:
    rng = random.Random(5)
    rankings = [
        Judged(gains=tuple(rng.choice((0, 0, 0, 0, 1)) for _ in range(depth)), n_units=rng.randint(1, 10), mode="doc",
               ids=tuple(str(i) for i in range(depth)))
        for _ in range(items)
    ]
    start = time.perf_counter()
    aggregate([rank_metrics(j, KS) for j in rankings])
    return {"items": items, "depth": depth, "ks": len(KS), "seconds": round(time.perf_counter() - start, 3)}


def bench_quotes(items: int = 10_000, docs: int = 20_000) -> dict:
    rng = random.Random(0)
    vocab = ["".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=rng.randint(2, 9))) for _ in range(20_000)]
    corpus = [
        Document(id=f"d{i}", content="\n".join(" ".join(rng.choices(vocab, k=12)) for _ in range(8)), meta={"doc_id": f"d{i}"})
        for i in range(docs)
    ]
    golden = []
    for i in range(items):
        source = corpus[rng.randrange(docs)]
        tokens = normalise_whitespace(source.content).split(" ")
        start = rng.randrange(len(tokens) - 20)
        quote = " ".join(tokens[start : start + rng.randint(8, 25)])
        golden.append(GoldenItem(id=str(i), question="?", evidence=(quote,), source=source.id if i % 2 else None))
    start = time.perf_counter()
    locate_evidence(golden, corpus, "bench")
    return {"quotes": items, "documents": docs, "half_without_source": True, "seconds": round(time.perf_counter() - start, 3)}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.parse_args(argv)  # no options: --help only
    print(json.dumps({"rank_metrics": bench_metrics(), "quote_location": bench_quotes()}, indent=2))


if __name__ == "__main__":
    sys.exit(main())
