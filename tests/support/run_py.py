"""Running `run.py` as a user does (a subprocess), and reading what it logged."""

import json
import subprocess
import sys
from pathlib import Path

import mlflow
from mlflow.tracking import MlflowClient
from omegaconf import DictConfig

from experiments.runs.config import compose
from tests.support.paths import ROOT


def isolated(tmp_path: Path) -> list[str]:
    """Overrides that keep a job's index cache, MLflow store and artifacts in the test's folder."""
    return [f"paths.cache={tmp_path / 'cache'}", f"mlflow.tracking_uri=sqlite:///{tmp_path / 'mlflow.db'}",
            f"mlflow.artifact_root={tmp_path / 'artifacts'}"]


def job_config(tmp_path: Path, *overrides: str) -> DictConfig:
    """The config run.py would compose, for `run_job` in process."""
    return compose([*isolated(tmp_path), *overrides])


def run(tmp_path: Path, *overrides: str, check: bool = True) -> subprocess.CompletedProcess:
    flags = [o for o in overrides if o.startswith("-")]
    args = [
        sys.executable,
        str(ROOT / "run.py"),
        *flags,
        *isolated(tmp_path),
        *(o for o in overrides if not o.startswith("-")),
    ]
    result = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    if check and result.returncode != 0:
        raise AssertionError(f"run.py failed ({result.returncode}):\n{result.stdout[-3000:]}\n{result.stderr[-5000:]}")
    return result


def client(tmp_path: Path) -> MlflowClient:
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path / 'mlflow.db'}")
    return MlflowClient()


def job_dir(tmp_path: Path, name: str) -> Path:
    return tmp_path / "jobs" / name


def write_local_dataset(tmp_path: Path) -> list[str]:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "travel.txt").write_text(
        "Travel policy. The nightly hotel limit is $310 in London and $250 in other cities.", encoding="utf-8"
    )
    (corpus / "leave.txt").write_text(
        "Leave policy. Full-time employees accrue 20 days of paid annual leave per calendar year.", encoding="utf-8"
    )
    (corpus / "zh.txt").write_text("差旅标准。员工出差住宿标准为一线城市每晚不超过600元。", encoding="utf-8")
    golden = [
        {"id": "en-1", "question": "What is the hotel limit per night in London?", "reference_answer": "$310",
         "evidence": ["The nightly hotel limit is $310 in London"], "category": "fact"},
        {"id": "en-2", "question": "How many days of paid annual leave do full-time employees accrue?",
         "reference_answer": "20 days", "evidence": ["Full-time employees accrue 20 days of paid annual leave"],
         "category": "numeric"},
        {"id": "zh-1", "question": "在一线城市出差，每晚住宿最多报销多少？", "reference_answer": "600元",
         "evidence": ["员工出差住宿标准为一线城市每晚不超过600元"], "category": "numeric"},
        {"id": "un-1", "question": "Am I allowed to bring my dog to the office?", "category": "unanswerable",
         "answerable": False},
    ]
    (tmp_path / "golden.jsonl").write_text("".join(json.dumps(g, ensure_ascii=False) + "\n" for g in golden), encoding="utf-8")
    return ["dataset=local", f"dataset.corpus_dir={corpus}", f"dataset.golden={tmp_path / 'golden.jsonl'}"]
