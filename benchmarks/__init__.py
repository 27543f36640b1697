"""Benchmark scripts, each run from the repository root as `python -m benchmarks.NAME`; docs/results/ keeps
what they measured. Like every entry point, the package sets the environment defaults (telemetry off) before a
script imports Haystack or MLflow, which read them on import."""

from experiments.runs.process import set_env_defaults

set_env_defaults()
