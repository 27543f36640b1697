"""What the offline agent (pipeline=agentic on SmolLM2 under the tools' JSON schema) achieves on the demo, beside
`advanced` with the same models.

    python -m benchmarks.agentic_offline            # demo-en and demo-zh, free first step and search first
    python -m benchmarks.agentic_offline --subsets en --reuse

Each configuration is one `python run.py` job (benchmarks/jobs.py); the table reads its metrics.json. Writes
docs/results/<date>-agentic-offline.md.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.jobs import run_job  # noqa: E402

RESULTS = ROOT / "docs" / "results"
# Job folder -> (what the table calls it, its overrides).
CONFIGS: dict[str, tuple[str, list[str]]] = {
    "advanced": ("advanced (no agent)", ["pipeline=advanced"]),
    "agentic": ("agentic, free first step", ["pipeline=agentic"]),
    "agentic_search_first": ("agentic, search first",
                             ["pipeline=agentic", "pipeline.components.agent.first_tool=kb_search"]),
}
COLUMNS = {
    "retrieval/recall_at_10": "recall@10",
    "context/recall": "context recall",
    "answer/f1": "answer F1",
    "answer/false_refusal_rate": "false refusals",
    "answer/refusal_accuracy": "refusal acc.",
    "agent/steps_per_question": "steps/q",
    "agent/tool_calls/kb_search": "kb_search/q",
    "agent/tool_calls/sql_query": "sql_query/q",
    "agent/stop_reason/final_answer": "answered",
    "agent/stop_reason/repeated_call": "repeated call",
    "agent/stop_reason/length": "cut off",
    "latency/p95_ms": "p95 ms",
}


def report(rows: dict[tuple[str, str], dict[str, float]], command: str) -> str:
    header = "| set | configuration | " + " | ".join(COLUMNS.values()) + " |"
    lines = [header, "|" + "---|" * (len(COLUMNS) + 2)]
    for (subset, config), metrics in rows.items():
        cells = [_cell(metrics.get(key)) for key in COLUMNS]
        lines.append(f"| demo-{subset} | {config} | " + " | ".join(cells) + " |")
    return "\n".join([
        f"Command: `{command}` · [all results](README.md) · [README](../../README.md)",
        "",
        "# The offline agent on the demo",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}. "
        "SmolLM2-135M (llama.cpp, greedy) writes each step under the tools' JSON schema; kb_search runs `advanced` retrieval (e5 + BM25, rules rewriter) and returns 3 passages; sql_query "
        "reads data/demo/sql/company.sql. The demo's golden questions need documents only (none needs SQL yet).",
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
    parser.add_argument("--subsets", nargs="+", default=["en", "zh"])
    parser.add_argument("--jobs", type=Path, default=ROOT / ".cache" / "ragtune" / "bench" / "agentic")
    parser.add_argument("--reuse", action="store_true", help="read finished jobs instead of running them again")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    rows = {}
    for subset in args.subsets:
        for slug, (config, overrides) in CONFIGS.items():
            job = args.jobs / f"{subset}-{slug}"
            metrics, _ = run_job([*overrides, f"dataset.subset={subset}", "eval.trace_sample=0"], job, args.reuse)
            rows[(subset, config)] = metrics
            print(f"demo-{subset} {config}: F1 {metrics.get('answer/f1', 0):.3f}, "
                  f"recall@10 {metrics.get('retrieval/recall_at_10', 0):.3f}", flush=True)
    given = [a for a in (argv if argv is not None else sys.argv[1:]) if a != "--reuse"]  # --reuse only re-renders
    command = "python -m benchmarks.agentic_offline " + " ".join(given)
    out = args.out or RESULTS / f"{datetime.date.today().isoformat()}-agentic-offline.md"
    out.write_text(report(rows, command.strip()), encoding="utf-8")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
