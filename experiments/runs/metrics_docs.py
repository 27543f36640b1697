"""`ragtune metrics-docs [--check]`: writes docs/metrics.md from the metric declarations (metric_catalog.py) and the
page's prose (metrics_page.md, beside this module); with --check, exits 1 when the file differs from what it
would write.

The prose holds one marker per table: `<!-- metrics: <layer> -->` for each layer's metrics and
`<!-- diagnosis layers -->` for the layers the diagnosis names, so the reference cannot drift from the code.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from experiments.evaluation.diagnosis import DESCRIPTIONS, LAYERS
from experiments.evaluation.metric_registry import Layer, MetricInfo
from experiments.runs.config import PROJECT_DIR
from experiments.runs.docs_page import page_command
from experiments.runs.metric_catalog import METRICS

PAGE = Path(__file__).with_name("metrics_page.md")
METRICS_DOCS = PROJECT_DIR / "docs" / "metrics.md"
_MARKER = re.compile(r"^<!-- (.+) -->$", re.MULTILINE)


def metrics_reference(metrics: Sequence[MetricInfo] = METRICS) -> str:
    """The page: its prose with each marker replaced by its table."""
    tables = {
        f"metrics: {layer.value}": _metric_table([m for m in metrics if m.layer is layer]) for layer in Layer
    }
    tables["diagnosis layers"] = _diagnosis_table()
    page = PAGE.read_text(encoding="utf-8")
    markers = _MARKER.findall(page)
    if sorted(markers) != sorted(tables):
        raise ValueError(f"{PAGE.name} must hold one marker for each of {sorted(tables)}, not {markers}")
    return _MARKER.sub(lambda marker: tables[marker[1]], page)


def _metric_table(metrics: Sequence[MetricInfo]) -> str:
    rows = [f"| `{m.name}` | {m.direction.value} | {_escape(m.description)} |" for m in metrics]
    return "\n".join(["| metric | better when | what it measures |", "|---|---|---|", *rows])


def _diagnosis_table() -> str:
    rows = [f"| `{layer}` | {_escape(DESCRIPTIONS[layer])} |" for layer in LAYERS]
    return "\n".join(["| layer, in pipeline order | meaning |", "|---|---|", *rows])


def _escape(cell: str) -> str:
    return cell.replace("|", "\\|")


def main(argv: Sequence[str]) -> int:
    return page_command(argv, "metrics-docs", __doc__, METRICS_DOCS, metrics_reference)
