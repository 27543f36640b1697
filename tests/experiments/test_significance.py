import numpy as np
import pytest

from experiments.significance import mean_ci, paired


def test_mean_ci_brackets_the_mean_and_degenerates_cleanly():
    values = np.random.default_rng(0).random(100)
    interval = mean_ci(values)
    assert interval.low < values.mean() < interval.high and interval.n == 100
    assert mean_ci([1.0, 1.0]).low == mean_ci([1.0, 1.0]).high == 1.0
    assert mean_ci([0.3]).low == 0.3


def test_a_clear_paired_gain_is_significant_and_its_ci_excludes_zero():
    rng = np.random.default_rng(1)
    baseline = rng.random(80)
    candidate = baseline + 0.1 + rng.normal(0, 0.05, 80)
    result = paired("answer/f1", baseline, candidate)
    assert result.diff == pytest.approx(np.mean(candidate - baseline))
    assert 0 < result.low < result.diff < result.high and result.p_value < 0.01


def test_noise_is_not_significant_and_identical_runs_give_p_one():
    rng = np.random.default_rng(2)
    baseline = rng.random(60)
    noisy = paired("m", baseline, baseline + rng.normal(0, 0.01, 60) - 0.0)
    assert noisy.low < 0 < noisy.high or noisy.p_value > 0.05
    same = paired("m", baseline, baseline)
    assert (same.diff, same.low, same.high, same.p_value) == (0, 0, 0, 1.0)


def test_paired_samples_must_align():
    with pytest.raises(ValueError, match="differ in length"):
        paired("m", [1, 2], [1])
