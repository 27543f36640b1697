"""What an Optuna study leaves on the sweep's parent run: every trial and the Pareto front as tables, the front as a
plot, and the figures a reader looks for first (best objective, failed trials, indexing time the cache saved)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure
from mlflow.tracking import MlflowClient

from experiments.tuning.optuna_study import StudyResult, TrialResult
from pipelines.run_layout import BEST_TRIAL_TAG, CI_NOTE_TAG


def trials_frame(result: StudyResult, trials: list[TrialResult]) -> pd.DataFrame:
    rows = []
    for trial in trials:
        row = {"trial": trial.number, "state": "failed" if trial.failed else "complete"}
        row |= {name: value for name, value in zip(result.objectives, trial.values or (), strict=False)}
        row |= {f"param {key}": value for key, value in trial.params.items()}
        row |= {"index_seconds": trial.index_seconds, "index_cache_hit": trial.cache_hit, "error": trial.error or ""}
        rows.append(row)
    return pd.DataFrame(rows)


def plot_pareto(result: StudyResult, path: Path) -> Path:
    """Every complete trial on the first two objectives, the Pareto front joined and labelled by trial number."""
    figure = Figure(figsize=(7.5, 5.2))
    axes = figure.subplots()
    x_name, y_name = result.objectives[1], result.objectives[0]
    done = [t for t in result.trials if not t.failed]
    axes.scatter([t.values[1] for t in done], [t.values[0] for t in done],  # type: ignore[index]
                 color="#9aa5b1", label="trial", zorder=2)
    front = sorted(result.pareto, key=lambda t: t.values[1])  # type: ignore[index]
    axes.plot([t.values[1] for t in front], [t.values[0] for t in front],  # type: ignore[index]
              color="#d1495b", marker="o", linewidth=2, label="Pareto front", zorder=3)
    for trial in front:
        axes.annotate(f"#{trial.number}", (trial.values[1], trial.values[0]),  # type: ignore[index]
                      textcoords="offset points", xytext=(6, 4), fontsize=9)
    axes.set_xlabel(f"{x_name} ({result.directions[1]})")
    axes.set_ylabel(f"{y_name} ({result.directions[0]})")
    failed = sum(t.failed for t in result.trials)
    axes.set_title(f"Optuna: {len(result.trials)} trials, {failed} failed")
    axes.grid(alpha=0.3)
    axes.legend(loc="best")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    return path


def report_study(result: StudyResult, out_dir: Path, parent_run_id: str | None) -> list[Path]:
    """Writes the tables and the plot into `out_dir` and logs them, with the headline figures, on the parent."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / "optuna_trials.csv", out_dir / "optuna_pareto.csv"]
    trials_frame(result, result.trials).to_csv(paths[0], index=False)
    trials_frame(result, result.pareto).to_csv(paths[1], index=False)
    if result.pareto and len(result.objectives) >= 2:
        paths.append(plot_pareto(result, out_dir / "optuna_pareto.png"))
    if result.test_checks:
        paths.append(out_dir / "optuna_test.csv")
        pd.DataFrame([
            {"config": c.label, "overrides": " ".join(c.overrides), "dev": c.dev_value,
             "test": c.test.mean if c.test else None, "test_low": c.test.low if c.test else None,
             "test_high": c.test.high if c.test else None,
             "vs_default": c.versus_default.diff if c.versus_default else None,
             "vs_default_low": c.versus_default.low if c.versus_default else None,
             "vs_default_high": c.versus_default.high if c.versus_default else None,
             "p_value": c.versus_default.p_value if c.versus_default else None,
             "drop_beyond_ci": c.drop_beyond_ci, "ci_note": c.ci_note or "", "error": c.error or ""}
            for c in result.test_checks
        ]).to_csv(paths[-1], index=False)
    if parent_run_id is not None:
        client = MlflowClient()
        for path in paths:
            client.log_artifact(parent_run_id, str(path), "optuna")
        client.log_metric(parent_run_id, "optuna/trials", float(len(result.trials)))
        client.log_metric(parent_run_id, "optuna/failed_trials", float(sum(t.failed for t in result.trials)))
        client.log_metric(parent_run_id, "optuna/index_seconds_saved", result.index_seconds_saved)
        if result.pareto:
            best = result.pareto[0]
            client.log_metric(parent_run_id, f"optuna/best/{result.objectives[0]}", best.values[0])  # type: ignore[index]
            client.set_tag(parent_run_id, BEST_TRIAL_TAG, str(best.number))
        notes = [f"test {c.label}: {c.ci_note}" for c in result.test_checks if c.ci_note]
        if notes:
            client.set_tag(parent_run_id, CI_NOTE_TAG, "; ".join(notes))
    return paths
