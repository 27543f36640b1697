"""Each technique switched alone against its baseline, per set: paired differences with CIs, and cost.

    python -m benchmarks.ablation                                   # every set and technique (hours on 2 cores)
    python -m benchmarks.ablation --sets demo_zh --techniques reranker=e5 compressor=extractive
    python -m benchmarks.ablation --overrides models=minilm --out outputs/ablation_minilm   # another embedder
    python -m benchmarks.ablation --techniques pipeline=crag crag-refinement crag-supplementary crag-refusal

Every job is `run.py` with the offline defaults (span answerer) plus the technique's overrides; the baseline is
`pipeline=hybrid_rag` for the retrieval techniques, `advanced` for `pipeline=crag`, `crag` for the CRAG parts
switched off one at a time, `adaptive router=fixed` (always multi_step) for the router, and `answer=llm` for the
self-check. Questions that should not retrieve (a `no_retrieval` or `clarify` golden route) are left out of the
refusal column. Per set and technique the table gives the paired difference from the baseline, question by
question (experiments/comparison/significance.py: bootstrap 95 % CI and permutation p-value), of retrieval recall@10 and
MRR@10, the reranked order's MRR@10 (`stage/reranker`), context recall, precision and tokens, answer F1 and refusal
accuracy (refused exactly when unanswerable), then the technique's LLM calls and tokens per question and its p50
and p95 seconds per question. Sets: the demo (both languages), its Chinese questions, and HaluEval-200 with 2,000
distractor articles, and the demo's conversations (follow-ups and comparisons); `--sets halueval_200` is HaluEval-200
without distractors.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.common import ROOT, run_job
from components.routers.routes import CONVERSATIONAL
from experiments.comparison.paired_compare import compare_records

SETS = {
    "demo": [],
    "demo_zh": ["dataset.subset=zh"],
    "halueval": ["dataset=halueval", "dataset.distractors=2000"],  # 200 questions, 2,000 distractor articles
    # Without distractors: an e5 index of the 2,000-distractor set takes about 45 minutes to build on 2 cores.
    "halueval_200": ["dataset=halueval"],
    # 39 follow-ups (their history unread by hybrid_rag and the expanders), 10 comparisons, 6 complete questions
    "conversations": ["dataset=demo_conversations"],
}
# A question rewriter or expander alone: pipeline=advanced with its other slots off.
REWRITER_ALONE = ["pipeline=advanced", "reranker=none", "compressor=none"]
BASELINES = {
    "hybrid_rag": ["pipeline=hybrid_rag"],
    "advanced": ["pipeline=advanced"],
    "crag": ["pipeline=crag"],
    "adaptive router=fixed": ["pipeline=adaptive", "router=fixed"],
    "answer=llm": ["answer=llm"],
}
# The baseline of each technique that is not measured against hybrid_rag.
AGAINST = {
    "pipeline=crag": "advanced",
    "crag-refinement": "crag",
    "crag-supplementary": "crag",
    "crag-refusal": "crag",
    "pipeline=adaptive": "adaptive router=fixed",
    "selfcheck.max_retries=2": "answer=llm",
}
TECHNIQUES = {
    "rewriter=rules": REWRITER_ALONE,
    **{f"rewriter={name}": [*REWRITER_ALONE, f"rewriter={name}"] for name in ("multi_query", "hyde", "step_back", "decompose", "decompose_sequential")},
    "reranker=e5": ["reranker=e5"],
    "reranker=mmr": ["reranker=mmr"],
    "compressor=extractive": ["compressor=extractive"],
    "pipeline=advanced": ["pipeline=advanced"],
    # CRAG's evaluator with its actions, then each part switched off alone: the strip refinement (compressor), the
    # supplementary search (upper = lower leaves no ambiguous band), the refusal (incorrect searches instead).
    "pipeline=crag": ["pipeline=crag"],
    "crag-refinement": ["pipeline=crag", "compressor=none"],
    "crag-supplementary": ["pipeline=crag", "crag.upper=${crag.lower}"],
    "crag-refusal": ["pipeline=crag", "crag.incorrect_action=search"],
    "pipeline=adaptive": ["pipeline=adaptive"],
    "selfcheck.max_retries=2": ["answer=llm", "selfcheck.max_retries=2"],
}
PAIRED = {
    "retrieval/recall_at_10": "recall@10",
    "retrieval/mrr_at_10": "MRR@10",
    "stage/reranker/mrr_at_10": "reranked MRR@10",
    "context/recall": "ctx recall",
    "context/precision": "ctx precision",
    "context/tokens": "ctx tokens",
    "answer/f1": "F1",
    "refusal_correct": "refusal acc.",
}


def with_refusal(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Records by id, each with `refusal_correct`: 1 when it refused exactly when the question is unanswerable
    (absent for a question that should not retrieve, which no refusal serves)."""
    return {
        str(r["id"]): r if r.get("expected_route") in CONVERSATIONAL else r | {
            "refusal_correct": float(bool(r.get("refused")) == (not r.get("answerable", True)))}
        for r in records
    }


def cost(metrics: dict[str, float], records: list[dict[str, Any]]) -> dict[str, float]:
    def mean(key: str) -> float:
        return sum(r.get(key, 0.0) for r in records) / max(len(records), 1)

    return {
        "llm_calls": mean("cost/llm_calls"),
        "prompt_tokens": mean("cost/prompt_tokens"),
        "completion_tokens": mean("cost/completion_tokens"),
        "p50_s": metrics["latency/p50_ms"] / 1000,
        "p95_s": metrics["latency/p95_ms"] / 1000,
    }


def table(name: str, against: str, baseline: tuple[dict, list], rows: dict[str, tuple[dict, list]]) -> str:
    head = ["technique", *PAIRED.values(), "LLM calls/q", "tokens/q (prompt+completion)", "p50 / p95 s"]
    lines = [f"**{name}**, against `{against}`", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    base = cost(*baseline)
    lines.append(
        f"| {against} (baseline) | {' | '.join('' for _ in PAIRED)} | {base['llm_calls']:.2f} | "
        f"{base['prompt_tokens']:.0f}+{base['completion_tokens']:.0f} | {base['p50_s']:.2f} / {base['p95_s']:.2f} |"
    )
    for technique, (metrics, records) in rows.items():
        compared = {c.metric: c for c in compare_records(with_refusal(baseline[1]), with_refusal(records), list(PAIRED))}
        cells = [
            f"{c.diff:+.3f} [{c.low:+.3f}, {c.high:+.3f}] p {c.p_value:.2g}" if (c := compared.get(m)) else "–"
            for m in PAIRED
        ]
        spent = cost(metrics, records)
        lines.append(
            f"| {technique} | {' | '.join(cells)} | {spent['llm_calls']:.2f} | "
            f"{spent['prompt_tokens']:.0f}+{spent['completion_tokens']:.0f} | "
            f"{spent['p50_s']:.2f} / {spent['p95_s']:.2f} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", nargs="+", choices=list(SETS), default=[s for s in SETS if s != "halueval_200"])
    parser.add_argument("--techniques", nargs="+", choices=list(TECHNIQUES), default=list(TECHNIQUES))
    parser.add_argument("--out", type=Path, default=ROOT / "outputs" / "ablation")
    parser.add_argument("--json", type=Path, help="also write every job's metrics here")
    parser.add_argument("--reuse", action="store_true", help="read jobs already finished under --out")
    parser.add_argument("--overrides", nargs="*", default=[], help="run.py overrides for every job, e.g. models=minilm")
    args = parser.parse_args(argv)
    report: dict[str, Any] = {}
    for name in args.sets:
        common = [*SETS[name], "eval.trace_sample=0", *args.overrides]
        report[name] = {}
        for against in dict.fromkeys(AGAINST.get(t, "hybrid_rag") for t in args.techniques):
            folder = "baseline" if against == "hybrid_rag" else f"baseline-{against.replace('=', '-').replace(' ', '_')}"
            baseline = run_job([*BASELINES[against], *common], args.out / name / folder, args.reuse)
            rows = {
                t: run_job([*TECHNIQUES[t], *common], args.out / name / t.replace("=", "-"), args.reuse)
                for t in args.techniques
                if AGAINST.get(t, "hybrid_rag") == against
            }
            print(table(name, against, baseline, rows) + "\n", flush=True)
            report[name] |= {f"baseline {against}": baseline[0], **{t: metrics for t, (metrics, _) in rows.items()}}
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    sys.exit(main())
