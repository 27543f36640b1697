"""Confidence intervals and paired tests on per-question scores (SciPy's bootstrap and permutation test).

ranx's `compare` tests only its own rank metrics on qrels; ours include span-credited and answer metrics, so the
tests run on the per-question values every run logs. Paired, because both runs answer the same questions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

RESAMPLES = 2000
SEED = 0
# Below this many questions a bootstrap interval is no measure of uncertainty (one question gives [1.0, 1.0]).
MIN_CI_QUESTIONS = 10


@dataclass(frozen=True)
class Interval:
    mean: float
    low: float
    high: float
    n: int


@dataclass(frozen=True)
class PairedComparison:
    metric: str
    baseline: float
    candidate: float
    diff: float
    low: float
    high: float
    p_value: float
    n: int


def mean_ci(values: Sequence[float], confidence: float = 0.95) -> Interval:
    """Percentile bootstrap CI of the mean; a single value or a constant sample gets a zero-width interval."""
    data = np.asarray(values, dtype=float)
    mean = float(data.mean()) if data.size else float("nan")
    if data.size < 2 or np.all(data == data[0]):
        return Interval(mean, mean, mean, int(data.size))
    result = stats.bootstrap(
        (data,), np.mean, vectorized=True, confidence_level=confidence, n_resamples=RESAMPLES, method="percentile", random_state=SEED
    )
    return Interval(mean, float(result.confidence_interval.low), float(result.confidence_interval.high), int(data.size))


def ci_note(questions: int) -> str | None:
    """Why the confidence intervals over `questions` questions mean nothing, or None when they do."""
    if questions >= MIN_CI_QUESTIONS:
        return None
    return f"CI not meaningful: {questions} question{'s' if questions != 1 else ''}, fewer than {MIN_CI_QUESTIONS}"


def paired(metric: str, baseline: Sequence[float], candidate: Sequence[float], confidence: float = 0.95) -> PairedComparison:
    """Candidate minus baseline: bootstrap CI of the mean difference and a two-sided paired permutation p-value."""
    a, b = np.asarray(baseline, dtype=float), np.asarray(candidate, dtype=float)
    if a.shape != b.shape:
        raise ValueError(f"{metric}: paired samples differ in length ({a.size} vs {b.size})")
    diff = b - a
    d = _mean(diff)
    if diff.size < 2 or np.all(diff == 0):
        return PairedComparison(metric, _mean(a), _mean(b), d, d, d, 1.0, int(diff.size))
    if np.all(diff == diff[0]):  # the bootstrap of a constant difference is that difference
        low = high = d
    else:
        ci = stats.bootstrap(
            (a, b),
            _mean_difference,
            paired=True,
            vectorized=True,
            confidence_level=confidence,
            n_resamples=RESAMPLES,
            method="percentile",
            random_state=SEED,
        ).confidence_interval
        low, high = float(ci.low), float(ci.high)
    test = stats.permutation_test(
        (a, b),
        _mean_difference,
        permutation_type="samples",
        vectorized=True,
        n_resamples=RESAMPLES,
        alternative="two-sided",
        random_state=SEED,
    )
    return PairedComparison(metric, _mean(a), _mean(b), d, low, high, float(test.pvalue), int(diff.size))


def _mean_difference(baseline: np.ndarray, candidate: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.mean(candidate - baseline, axis=axis)


def _mean(values: np.ndarray) -> float:
    return float(values.mean()) if values.size else float("nan")
