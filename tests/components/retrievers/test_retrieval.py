import numpy as np
import pytest

from components.retrievers.retrieval import top_indices


@pytest.mark.parametrize("seed", range(20))
def test_a_sample_bounding_the_kth_score_changes_nothing(seed):
    """Whatever documents the sample holds, the top k (ties to the lower index) are those found without it."""
    rng = np.random.default_rng(seed)
    scores = rng.choice([0.0, 0.0, 0.5, 1.0, 1.5, 2.0, 3.0], size=500).astype(np.float32)
    scores[rng.choice(500, 40, replace=False)] = rng.random(40).astype(np.float32) * 4
    for top_k in (1, 5, 10, 60):
        sample = rng.choice(500, int(rng.integers(top_k, 200)), replace=False)
        expected = top_indices(scores, top_k, floor=0.0)
        assert top_indices(scores, top_k, floor=0.0, sample=sample).tolist() == expected.tolist()


def test_a_sample_smaller_than_k_is_not_used():
    scores = np.array([0.0, 3.0, 1.0, 2.0], dtype=np.float32)
    assert top_indices(scores, 3, floor=0.0, sample=np.array([1])).tolist() == [1, 3, 2]
