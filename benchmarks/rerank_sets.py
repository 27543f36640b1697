"""Does a reranker improve the ranking it is given, on every set we can build offline?

    python -m benchmarks.rerank_sets                                  # reranker=e5 on every set, both index models
    python -m benchmarks.rerank_sets --sets demo-zh halueval --models e5_small --weights 0 1 \\
        --reranker e5 --json rerank.json

Per set, index model (`models=...`) and `reranker.component.upstream_weight`, `run.py pipeline=hybrid` runs once
with the reranker on (the index cache is reused across runs). Both rankings come from that one run, question by
question: the fused candidates (`stage/fusion`) and the reranker's order of them (`stage/reranker`). The table
gives MRR@10 of each and their paired difference with its 95 % bootstrap CI and permutation p-value
(experiments/comparison/significance.py), plus the reranker's share of the p50 latency. The sets are fusion_loso.py's: the
demo in each language, HaluEval-200 and every Debian doc set built under `<cache>/doc_sets/`.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.common import ROOT, run_job
from benchmarks.fusion_loso import BUILTIN_SETS, doc_set_overrides
from components.common.paths import cache_root
from experiments.comparison.significance import paired

BEFORE, AFTER = "stage/fusion/mrr_at_10", "stage/reranker/mrr_at_10"


def figures(metrics: dict[str, float], records: list[dict[str, Any]]) -> dict[str, Any]:
    both = [r for r in records if r.get(BEFORE) is not None and r.get(AFTER) is not None]
    result = paired("mrr_at_10", [r[BEFORE] for r in both], [r[AFTER] for r in both])
    return {
        "questions": result.n,
        "fusion": round(result.baseline, 3),
        "reranked": round(result.candidate, 3),
        "diff": round(result.diff, 3),
        "ci95": [round(result.low, 3), round(result.high, 3)],
        "p": round(result.p_value, 4),
        "rerank_ms_p50": round(metrics.get("latency/reranker/p50_ms", float("nan")), 1),
        "latency_ms_p50": round(metrics["latency/p50_ms"], 1),
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", nargs="+", help="set names (default: all)")
    parser.add_argument("--models", nargs="+", default=["offline", "e5_small"], help="index models (models=...)")
    parser.add_argument("--weights", nargs="+", type=float, default=[0.0, 1.0], help="upstream_weight values")
    parser.add_argument("--reranker", default="e5", help="reranker group choice")
    parser.add_argument("--cache", type=Path, default=ROOT / cache_root())
    parser.add_argument("--out", type=Path, default=ROOT / "outputs" / "rerank_sets")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args(argv)
    known = BUILTIN_SETS | doc_set_overrides(args.cache)
    rows = []
    for name in args.sets or list(known):
        for model in args.models:
            for weight in args.weights:
                overrides = ["pipeline=hybrid", *known[name], f"models={model}", f"reranker={args.reranker}",
                             f"reranker.component.upstream_weight={weight:g}", f"paths.cache={args.cache}"]
                job = args.out / f"{name}-{model}-{args.reranker}-w{weight:g}"
                row = {"set": name, "models": model, "upstream_weight": weight, **figures(*run_job(overrides, job))}
                print(json.dumps(row, ensure_ascii=False), flush=True)
                rows.append(row)
    print("\n| set | models | upstream_weight | fusion MRR@10 | reranked | diff [95 % CI] | p | rerank ms p50 |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['set']} | {r['models']} | {r['upstream_weight']:g} | {r['fusion']:.3f} | {r['reranked']:.3f} | "
              f"{r['diff']:+.3f} [{r['ci95'][0]:+.3f}, {r['ci95'][1]:+.3f}] | {r['p']:.3g} | {r['rerank_ms_p50']} |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    sys.exit(main())
