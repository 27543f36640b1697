"""The default offline generating pipeline on the demo set and a HaluEval sample: speed, tokens, all three layers.

    python -m benchmarks.bench_answers [--sample 200] [--only demo_zh] [extra run.py overrides ...]

Runs `run.py` once per set (the index cache is reused), reads each job's metrics.json and prints JSON: p50/p95
seconds per question, tokens and LLM calls per question, and each layer's headline metric with its 95 % CI, plus
the issue's answer-layer targets and whether they were met. A cold HaluEval index takes about 10 minutes once.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from benchmarks.common import ROOT, run_job
from experiments.evaluation.answer_metrics import ANSWER

HEADLINE = ("retrieval/recall_at_10", "context/recall", "answer/f1")
REPORTED = tuple(m for m in ANSWER if m != "answer/f1")
# (metric, comparison, threshold) from the generation issue; "Chinese set" is the demo's Chinese questions.
TARGETS = {
    "halueval": [("answer/f1", ">=", 0.30)],
    "demo_zh": [("answer/f1", ">=", 0.30), ("answer/refusal_accuracy", ">=", 0.8), ("answer/false_refusal_rate", "<=", 0.1)],
    "demo": [("answer/refusal_accuracy", ">=", 0.8), ("answer/false_refusal_rate", "<=", 0.1)],
}


def sets(sample: int) -> dict[str, list[str]]:
    return {
        "demo": [],
        "demo_en": ["dataset.subset=en"],
        "demo_zh": ["dataset.subset=zh"],
        "halueval": ["dataset=halueval", f"dataset.sample={sample}"],
    }


def run_set(name: str, overrides: list[str], out: Path) -> dict:
    return run_job(overrides, out / name)[0]


def figures(metrics: dict, name: str) -> dict:
    result = {
        "questions": int(metrics["eval/questions"]),
        "seconds_per_question_p50": round(metrics["latency/p50_ms"] / 1000, 2),
        "seconds_per_question_p95": round(metrics["latency/p95_ms"] / 1000, 2),
        "prompt_tokens_per_question": round(metrics.get("cost/prompt_tokens_per_question", 0), 1),
        "completion_tokens_per_question": round(metrics.get("cost/completion_tokens_per_question", 0), 1),
        "llm_calls_per_question": round(metrics.get("cost/llm_calls_per_question", 0), 2),
    }
    for metric in HEADLINE:
        if metric in metrics:
            low, high = metrics.get(f"{metric}/ci95_low"), metrics.get(f"{metric}/ci95_high")
            result[metric] = [round(metrics[metric], 3), round(low, 3), round(high, 3)] if low is not None else round(metrics[metric], 3)
    result |= {m: round(metrics[m], 3) for m in REPORTED if m in metrics}
    result["targets"] = [
        {"metric": m, "target": f"{op} {t}", "measured": round(metrics[m], 3),
         "met": metrics[m] >= t if op == ">=" else metrics[m] <= t}
        for m, op, t in TARGETS.get(name, []) if m in metrics
    ]
    return result


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sample", type=int, default=200, help="HaluEval questions")
    parser.add_argument("--only", nargs="+", help="run only these sets (demo, demo_en, demo_zh, halueval)")
    parser.add_argument("--out", type=Path, default=ROOT / "outputs" / "bench_answers")
    parser.add_argument("overrides", nargs="*", help="extra run.py overrides, e.g. answer=llm")
    args = parser.parse_args(argv)
    report = {}
    for name, overrides in sets(args.sample).items():
        if args.only and name not in args.only:
            continue
        report[name] = figures(run_set(name, [*overrides, *args.overrides], args.out), name)
        print(json.dumps({name: report[name]}, ensure_ascii=False), flush=True)
    print(json.dumps(report, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    sys.exit(main())
