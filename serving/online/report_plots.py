"""The online report's plots (serving.online.report): matplotlib Figures without pyplot, so no display or global
state is needed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from matplotlib.figure import Figure


def plot_satisfaction(report: dict[str, Any], path: Path) -> Path:
    """Each variant's satisfaction rate with its Wilson 95 % CI; variants nobody rated are left out."""
    rated = {name: v["satisfaction"] for name, v in report["variants"].items() if v["satisfaction"]["n"]}
    figure = Figure(figsize=(6.5, 4.2))
    axes = figure.subplots()
    names = list(rated)
    rates = [s["rate"] for s in rated.values()]
    errors = [[s["rate"] - s["low"] for s in rated.values()], [s["high"] - s["rate"] for s in rated.values()]]
    colors = ["#2e86ab" if name == report["champion"] else "#d1495b" for name in names]
    axes.bar(names, rates, yerr=errors, capsize=6, color=colors)
    axes.set_ylim(0, 1)
    axes.set_ylabel("satisfaction rate (95% Wilson CI)")
    axes.set_title(f"{report['model']}: satisfaction, last {report['since']} (champion: {report['champion']})")
    axes.grid(axis="y", alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    return path


def plot_latency(report: dict[str, Any], path: Path) -> Path:
    """Each variant's latency p50 and p95, side by side."""
    names = list(report["variants"])
    figure = Figure(figsize=(6.5, 4.2))
    axes = figure.subplots()
    width = 0.4
    for offset, quantile, color in ((-width / 2, "p50", "#2e86ab"), (width / 2, "p95", "#edae49")):
        values = [report["variants"][n]["latency_ms"][quantile] or 0.0 for n in names]
        axes.bar([i + offset for i in range(len(names))], values, width, label=quantile, color=color)
    axes.set_xticks(range(len(names)), names)
    axes.set_ylabel("latency (ms)")
    axes.set_title(f"{report['model']}: latency, last {report['since']}")
    axes.legend(loc="best")
    axes.grid(axis="y", alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    return path
