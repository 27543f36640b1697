"""One `run.py` job from a benchmark script: its metrics.json and per-question records, read from its job folder."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def run_job(
    overrides: Sequence[str], job: Path, reuse: bool = False
) -> tuple[dict[str, float], list[dict[str, Any]]]:
    """Runs `run.py` with the overrides into `job` (the index cache is shared) and returns what it wrote.

    `reuse` reads a finished job already in `job` instead (delete the folder after changing its config)."""
    if not (reuse and (job / "metrics.json").exists() and (job / "per_question.jsonl").exists()):
        command = [sys.executable, str(ROOT / "run.py"), *overrides, f"hydra.run.dir={job}"]
        subprocess.run(command, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    lines = (job / "per_question.jsonl").read_text(encoding="utf-8").splitlines()
    return json.loads((job / "metrics.json").read_text()), [json.loads(line) for line in lines if line.strip()]
