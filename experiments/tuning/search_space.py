"""An Optuna search space written as Hydra sweep overrides, the syntax `python run.py -m` already takes.

    choice(none, e5)  or  none,e5      a category
    range(5, 55, 5)                    integers 5, 10, ..., 50
    interval(0.0, 1.0)                 a float in [0, 1]; int(interval(5, 50)) an integer
    tag(log, interval(1e-3, 1.0))      sampled on a log scale
    7                                  fixed: every trial takes it

Each key is an override, a config key (`retriever.top_k`) or a config group (`reranker`), and the value a trial
draws goes back to Hydra as `key=value`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import ChoiceSweep, IntervalSweep, Override, RangeSweep
from hydra.errors import HydraException
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution

from pipelines.errors import UserError

# Knobs that change the index: trials are grouped so that these change rarely (experiments/tuning/optuna_study.py).
INDEX_KEYS = ("ingest", "models", "store", "dataset")


class SearchSpaceError(UserError, ValueError):
    """A search space entry that cannot be searched; the message names the key."""


@dataclass(frozen=True)
class SearchSpace:
    distributions: dict[str, BaseDistribution]
    fixed: dict[str, str]  # key -> value, the same in every trial

    def overrides(self, params: Mapping[str, Any]) -> list[str]:
        """A trial's Hydra overrides: the fixed ones, then the drawn ones."""
        return [f"{key}={value}" for key, value in self.fixed.items()] + [
            f"{key}={_override_value(value)}" for key, value in params.items()
        ]

    def index_params(self, params: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
        """The drawn values that change the index (ingestion, embedder, store)."""
        return tuple(sorted((k, str(v)) for k, v in params.items() if k.split(".")[0].split("/")[0] in INDEX_KEYS))


def search_space(params: Mapping[str, str], arguments: Sequence[str]) -> SearchSpace:
    """The space of `params` (the sweeper's config) with the command line's `arguments` over them."""
    parser = OverridesParser.create()
    entries = [f"{key}={value}" for key, value in params.items()] + list(arguments)
    distributions: dict[str, BaseDistribution] = {}
    fixed: dict[str, str] = {}
    for override in (_parse(parser, entry) for entry in entries):
        key = override.get_key_element()
        distributions.pop(key, None)
        fixed.pop(key, None)
        if override.is_sweep_override():
            distributions[key] = _distribution(override, key)
        else:
            fixed[key] = override.get_value_element_as_str()
    if not distributions:
        raise SearchSpaceError("hydra.sweeper.params: nothing to search; give at least one choice(), range() or "
                               "interval() (e.g. retriever.top_k='range(5,55,5)')")
    return SearchSpace(distributions, fixed)


def _parse(parser: OverridesParser, entry: str) -> Override:
    """One entry; Hydra's parse error (a traceback through its grammar) becomes one line naming the entry."""
    try:
        return parser.parse_override(entry)
    except HydraException as e:
        raise SearchSpaceError(f"hydra.sweeper.params: {entry!r} does not parse: {str(e).splitlines()[0]}") from e


def _distribution(override: Override, key: str) -> BaseDistribution:
    """Optuna's own refusals of an empty or reversed range are tracebacks; these say which entry and why."""
    sweep = override._value  # Hydra's parsed sweep: ChoiceSweep, RangeSweep or IntervalSweep
    log = "log" in getattr(sweep, "tags", set())
    where = f"hydra.sweeper.params.{key}"
    if isinstance(sweep, ChoiceSweep):
        return CategoricalDistribution([_categorical(value) for value in sweep.list])
    if isinstance(sweep, RangeSweep):
        values = list(override.sweep_iterator()) if sweep.step else []
        if not values:
            raise SearchSpaceError(f"{where}: range({sweep.start}, {sweep.stop}, {sweep.step}) holds no value "
                                   "(the stop is exclusive; e.g. range(5, 55, 5) is 5, 10, ..., 50)")
        if not all(isinstance(v, int) for v in (sweep.start, sweep.stop, sweep.step)) or sweep.step < 0:
            return CategoricalDistribution(values)
        return IntDistribution(values[0], values[-1], step=sweep.step)
    if isinstance(sweep, IntervalSweep):
        if not sweep.start < sweep.end:
            raise SearchSpaceError(f"{where}: interval({sweep.start}, {sweep.end}) is empty: the low end must be "
                                   "below the high end")
        if log and sweep.start <= 0:
            raise SearchSpaceError(f"{where}: a log-scale interval must start above 0, got {sweep.start}")
        if isinstance(sweep.start, int) and isinstance(sweep.end, int):
            return IntDistribution(sweep.start, sweep.end, log=log)
        return FloatDistribution(float(sweep.start), float(sweep.end), log=log)
    raise SearchSpaceError(f"{where}: {type(sweep).__name__} cannot be searched")


def _categorical(value: Any) -> Any:
    """Optuna stores categories as None, bool, int, float or str; anything else goes as its override text."""
    return value if value is None or isinstance(value, bool | int | float | str) else str(value)


def _override_value(value: Any) -> str:
    """As Hydra reads it back; a float with 4 significant digits, which is all a run label can show."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)
