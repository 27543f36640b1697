"""One declaration per metric: its name, its layer, which way is better and what it measures.

Modelled on ragas's `Metric` objects (a name, a type, the columns it reads): the module that computes a
metric declares it once, beside the code, with `declare()`. experiments/runs/metric_catalog.py imports every
declaring module, so what it answers (`lower_is_better`, docs/metrics.md through `ragtune metrics-docs`)
covers them all.

A name may have variable parts: `<part>` stands for any text, `<k>` for a rank cut-off (digits), and `{a,b}`
for one of the listed words, so `stage/<component>/{hit,recall}_at_<k>` covers `stage/bm25/recall_at_10`. A
logged name is matched by its exact declaration, else by the matching pattern with the most fixed text.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from functools import cached_property

_VARIABLE = re.compile(r"<(\w+)>|\{([\w,]+)\}")


class Direction(Enum):
    """Which way is better: `ragtune compare` colours, and `ragtune gate` counts a regression, by it."""

    HIGHER = "higher"
    LOWER = "lower"
    # A count, a share or a time that describes a run rather than scores it; compared like HIGHER.
    NEITHER = "-"


class Layer(Enum):
    """The groups of docs/metrics.md, in its order; a value names its group's table in the page's template."""

    RETRIEVAL = "retrieval"
    CONTEXT = "context"
    ANSWER = "answer"
    QUERY = "query"
    SELFCHECK = "selfcheck"
    ROUTING = "routing"
    GRADING = "grading"
    AGENT = "agent"
    COST = "cost"
    DIAGNOSIS = "diagnosis"
    RUN = "run"


@dataclass(frozen=True)
class MetricInfo:
    name: str  # a logged name, or a pattern of them (the module docstring says how)
    layer: Layer
    direction: Direction
    description: str  # Markdown: what it measures and how, for docs/metrics.md
    module: str  # the module that declared it: the one that computes it

    @cached_property
    def pattern(self) -> re.Pattern[str]:
        parts, end = [], 0
        for match in _VARIABLE.finditer(self.name):
            parts.append(re.escape(self.name[end : match.start()]))
            if match[1]:
                parts.append(r"\d+" if match[1] == "k" else ".+")
            else:
                parts.append("(?:" + "|".join(map(re.escape, match[2].split(","))) + ")")
            end = match.end()
        parts.append(re.escape(self.name[end:]))
        return re.compile("".join(parts))

    @property
    def fixed_text(self) -> int:
        """How much of the name is fixed: of two patterns that match a name, the one with more wins."""
        return len(_VARIABLE.sub("", self.name))

    def matches(self, name: str) -> bool:
        return self.pattern.fullmatch(name) is not None


_DECLARED: dict[str, MetricInfo] = {}


def declare(name: str, layer: Layer, direction: Direction, description: str) -> str:
    """Registers a metric, from the module that computes it; returns the name for that module to log under."""
    if name in _DECLARED:
        raise ValueError(f"metric {name!r} is declared twice")
    module = sys._getframe(1).f_globals["__name__"]  # as collections.namedtuple finds its caller's module
    _DECLARED[name] = MetricInfo(name, layer, direction, description, module)
    return name


def declared() -> tuple[MetricInfo, ...]:
    """Every metric declared by the modules imported so far, in the order they were declared."""
    return tuple(_DECLARED.values())


def find(name: str, metrics: Iterable[MetricInfo]) -> MetricInfo | None:
    """The declaration of a logged name: its exact one, else the matching pattern with the most fixed text."""
    matching = [metric for metric in metrics if metric.matches(name)]
    return max(matching, key=lambda metric: (metric.name == name, metric.fixed_text), default=None)
