"""The study's control flow with jobs that write what run.py's jobs write (the real jobs: test_run.py's Optuna
sweep). A job is a function of its overrides here, so what the study does with each outcome can be asserted."""

import json
from pathlib import Path

import pytest

from experiments.tuning.optuna_study import DEV, TEST, JobOutcome, run_study
from experiments.tuning.search_space import search_space
from pipelines.errors import ConfigError

SPACE = search_space({"retriever.top_k": "choice(0, 5, 10)", "ingest.chunk_size": "choice(300, 500)"}, [])


class Jobs:
    """Writes metrics.json, run.json and per_question.jsonl as a job does; top_k=0 fails as its validation does."""

    def __init__(self, root: Path) -> None:
        self.root, self.batches, self.built = root, [], set()

    def __call__(self, batch: list[list[str]], first: int) -> list[JobOutcome]:
        self.batches.append(batch)
        return [self.job(overrides, first + i) for i, overrides in enumerate(batch)]

    def job(self, overrides: list[str], number: int) -> JobOutcome:
        folder = self.root / str(number)
        folder.mkdir()
        values = dict(o.split("=", 1) for o in overrides)
        top_k, chunk = int(values.get("retriever.top_k", 20)), values.get("ingest.chunk_size", "500")
        if top_k == 0:
            return JobOutcome(folder)  # failed: no metrics
        hit = chunk in self.built
        self.built.add(chunk)
        quality = 0.5 + top_k / 100 + (0.1 if chunk == "500" else 0.0)
        metrics = {"retrieval/mrr_at_10": quality, "latency/p95_ms": 10.0 + top_k,
                   "time/index_seconds": 0.5 if hit else 30.0, "index/cache_hit": float(hit)}
        (folder / "metrics.json").write_text(json.dumps(metrics))
        (folder / "run.json").write_text(json.dumps({"index_fingerprint": f"index-{chunk}"}))
        part = values.get("dataset.holdout.use", "all")
        records = [{"id": f"{part}-{i}", "question": "?", "retrieval/mrr_at_10": quality - (i % 2) * 0.2}
                   for i in range(6)]
        (folder / "per_question.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
        return JobOutcome(folder)


def test_failed_trials_are_told_as_failed_and_the_study_goes_on(tmp_path):
    jobs = Jobs(tmp_path)
    result = run_study(SPACE, ["retrieval/mrr_at_10", "latency/p95_ms"], ["maximize", "minimize"], 8, jobs, seed=3,
                       batch_size=4)
    assert len(result.trials) == 8
    failed = [t for t in result.trials if t.failed]
    assert failed and all(t.params["retriever.top_k"] == 0 for t in failed)
    assert all(not t.failed for t in result.pareto) and result.pareto
    best = result.pareto[0]
    assert best.values[0] == max(t.values[0] for t in result.trials if not t.failed)


def test_a_batch_runs_its_trials_grouped_by_index_and_the_cache_saving_is_counted(tmp_path):
    jobs = Jobs(tmp_path)
    result = run_study(SPACE, ["retrieval/mrr_at_10"], ["maximize"], 8, jobs, seed=1, batch_size=4)
    for batch in jobs.batches:
        chunks = [o for overrides in batch for o in overrides if o.startswith("ingest.chunk_size=")]
        assert chunks == sorted(chunks)
    built = {t.index_fingerprint for t in result.trials if not t.failed and not t.cache_hit}
    hits = [t for t in result.trials if not t.failed and t.cache_hit]
    assert result.index_seconds_saved == pytest.approx(29.5 * len(hits)) and built


def test_with_a_holdout_the_trials_see_dev_and_the_front_is_checked_on_test(tmp_path):
    jobs = Jobs(tmp_path)
    result = run_study(SPACE, ["retrieval/mrr_at_10", "latency/p95_ms"], ["maximize", "minimize"], 6, jobs, seed=0,
                       holdout=True)
    assert all(t.overrides[0] == DEV for t in result.trials)
    checks = result.test_checks
    assert [c.label for c in checks] == ["default", *(f"trial {t.number}" for t in result.pareto)]
    assert all(c.overrides[0] == TEST and c.test is not None for c in checks)
    assert checks[0].versus_default is None and all(c.versus_default.n == 6 for c in checks[1:])
    assert checks[1].test.mean == pytest.approx(checks[1].dev_value - 0.1)  # half the test questions score 0.2 less
    half_width = (checks[1].test.high - checks[1].test.low) / 2
    assert half_width < 0.1 and checks[1].drop_beyond_ci  # a drop beyond the CI: the search fit the dev questions


def test_objectives_and_directions_are_checked_before_any_trial(tmp_path):
    with pytest.raises(ConfigError, match="hydra.sweeper.objectives': give one direction per objective"):
        run_study(SPACE, ["retrieval/mrr_at_10", "latency/p95_ms"], ["maximize"], 2, Jobs(tmp_path))
    with pytest.raises(ConfigError, match="hydra.sweeper.directions': 'up' is not one of"):
        run_study(SPACE, ["retrieval/mrr_at_10"], ["up"], 2, Jobs(tmp_path))


def test_the_grid_sampler_takes_each_combination_once_and_needs_choices(tmp_path):
    result = run_study(SPACE, ["retrieval/mrr_at_10"], ["maximize"], 6, Jobs(tmp_path), sampler="grid")
    combinations = {tuple(sorted(t.params.items())) for t in result.trials}
    assert len(combinations) == 6  # 3 top_k x 2 chunk sizes, none twice
    loose = search_space({"retriever.fusion.agreement_bonus": "interval(0.0, 1.0)"}, [])
    with pytest.raises(ConfigError, match="grid needs choice\\(\\) entries; retriever.fusion.agreement_bonus"):
        run_study(loose, ["retrieval/mrr_at_10"], ["maximize"], 2, Jobs(tmp_path / "x"), sampler="grid")
