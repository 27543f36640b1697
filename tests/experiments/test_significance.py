import itertools

import numpy as np
import pytest

from experiments.comparison.significance import RESAMPLES, mean_ci, paired


def test_mean_ci_brackets_the_mean_and_degenerates_cleanly():
    values = np.random.default_rng(0).random(100)
    interval = mean_ci(values)
    assert interval.low < values.mean() < interval.high and interval.n == 100
    assert mean_ci([1.0, 1.0]).low == mean_ci([1.0, 1.0]).high == 1.0
    assert mean_ci([0.3]).low == 0.3


def exact_two_sided_p(differences: list[int]) -> float:
    """Share of the 2**n sign flips of the paired differences whose |sum| reaches the observed |sum|."""
    observed = abs(sum(differences))
    flips = itertools.product((1, -1), repeat=len(differences))
    sums = (sum(s * d for s, d in zip(signs, differences, strict=True)) for signs in flips)
    hits = sum(abs(total) >= observed for total in sums)
    return hits / 2 ** len(differences)


def test_a_clear_paired_gain_is_significant_and_its_ci_holds_the_true_gain():
    rng = np.random.default_rng(1)
    baseline = rng.random(80)
    candidate = baseline + 0.1 + rng.normal(0, 0.05, 80)
    result = paired("answer/f1", baseline, candidate)
    assert (result.metric, result.n) == ("answer/f1", 80)
    assert result.baseline == pytest.approx(baseline.mean())
    assert result.candidate == pytest.approx(candidate.mean())
    assert result.diff == pytest.approx(np.mean(candidate - baseline))
    assert 0 < result.low < 0.1 < result.high  # excludes 0, contains the true mean gain
    assert result.low < result.diff < result.high and result.high - result.low < 0.05
    # No random sign flip reaches the observed gain: the smallest p-value 2000 resamples can give.
    assert result.p_value == pytest.approx(2 / (RESAMPLES + 1))


def test_the_difference_is_candidate_minus_baseline_exactly():
    result = paired("m", [0.5, 0.25, 1.0, 0.0], [0.75, 0.25, 0.5, 1.0])
    assert (result.baseline, result.candidate, result.diff) == (0.4375, 0.625, 0.1875)
    assert paired("m", [0.75, 0.25, 0.5, 1.0], [0.5, 0.25, 1.0, 0.0]).diff == -0.1875


def test_small_samples_get_the_exact_permutation_p_value():
    # 2**5 sign flips < 2000 resamples, so SciPy enumerates them all: only +-[1..5] reach |sum| = 15.
    assert paired("m", [0] * 5, [1, 2, 3, 4, 5]).p_value == pytest.approx(2 / 32)
    differences = [3, -1, 4, 1, 5, -2, 6, 2, -1]
    result = paired("m", [0] * len(differences), differences)
    assert result.diff == pytest.approx(17 / 9)
    assert result.p_value == pytest.approx(exact_two_sided_p(differences))
    assert 0.05 < result.p_value < 0.2


def test_sign_symmetric_differences_are_null():
    result = paired("m", [0.5] * 6, [1.5, -0.5, 2.5, -1.5, 3.5, -2.5])
    assert result.diff == 0 and result.p_value == 1.0
    assert result.low < 0 < result.high


def test_identical_runs_give_p_one_and_a_zero_width_interval():
    baseline = np.random.default_rng(2).random(60)
    same = paired("m", baseline, baseline)
    assert (same.diff, same.low, same.high, same.p_value, same.n) == (0, 0, 0, 1.0, 60)


def test_a_constant_difference_has_a_zero_width_interval_at_that_difference():
    result = paired("m", [0.0, 0.25, 0.5, 0.75], [0.5, 0.75, 1.0, 1.25])
    assert (result.diff, result.low, result.high) == (0.5, 0.5, 0.5)
    # Exact: of the 16 sign flips only the two uniform ones reach |sum| = 2.
    assert result.p_value == pytest.approx(2 / 16)


def test_results_are_deterministic():
    rng = np.random.default_rng(3)
    baseline, candidate = rng.random(50), rng.random(50)
    assert paired("m", baseline, candidate) == paired("m", baseline, candidate)
    assert mean_ci(candidate) == mean_ci(candidate)


def test_paired_samples_must_align():
    with pytest.raises(ValueError, match="differ in length"):
        paired("m", [1, 2], [1])
