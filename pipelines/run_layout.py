"""Where a run's record lives, named once: the MLflow tags ragtune sets (on runs, model versions and traces),
the artifacts a run logs, and the files a job writes into its folder, which the Optuna study, compare, the
gate, promotion, serving and the benchmarks read back.

Every name is stored in runs and models already logged: changing one makes them unreadable, so names only get
added. This module sits in pipelines/ because the access contract (pipelines/access.py) tags runs too.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# --- run tags: on every run.py run (runner, tracking) -------------------------------------------------------
PIPELINE_TAG = "ragtune.pipeline"  # the pipeline group's name
GIT_COMMIT_TAG = "ragtune.git_commit"  # the commit that ran, `-dirty` with changed tracked files
PID_TAG = "ragtune.pid"  # the process that opened the run: a run it left RUNNING is found when it is gone
HOST_TAG = "ragtune.host"  # the machine of that process
STALE_TAG = "ragtune.stale"  # on a run ended FAILED because its process was gone
ERROR_TAG = "ragtune.error"  # why a run (a job, a study's parent) failed, cut to 5000 characters
DATASET_TAG = "ragtune.dataset"  # the data set's name
DATASET_FINGERPRINT_TAG = "ragtune.dataset_fingerprint"  # corpus, golden set, settings: the gate pairs on it
CORPUS_FINGERPRINT_TAG = "ragtune.corpus_fingerprint"  # the documents indexed
GOLDEN_FINGERPRINT_TAG = "ragtune.golden_fingerprint"  # the questions answered: compare pairs on it
LANGUAGE_TAG = "ragtune.language"  # the data set's language
INDEX_FINGERPRINT_TAG = "ragtune.index_fingerprint"  # the index snapshot searched: promotion ships it
INDEX_REBUILT_TAG = "ragtune.index_rebuilt"  # why the index cache missed
INDEX_UPDATED_FROM_TAG = "ragtune.index_updated_from"  # the snapshot an incremental update began from
INDEX_COLLECTION_TAG = "ragtune.index_collection"  # a server-side store's collection
STORE_URL_TAG = "ragtune.store_url"  # and the server holding it
ACCESS_FIELDS_TAG = "ragtune.access_fields"  # the meta fields scoping who sees a document (versions too)
ACCESS_META_FILE_TAG = "ragtune.access_meta_file"  # the digest of the file they came from (versions too)
CI_NOTE_TAG = "ragtune.ci"  # why a run's intervals are not meaningful, so the MLflow UI says so
MODEL_TAG_PREFIX = "ragtune.model."  # + a model slot: the identity of the model it ran (identities.py)


def tokenizer_tag(component: str, key: str) -> str:
    """The tag recording one fact of a component's tokenizer (its name, version), so a changed one shows."""
    return f"ragtune.{component}.tokenizer.{key}"


# --- sweep tags: on a sweep's jobs and on its parent run (experiments/runs/sweep.py) ------------------------
SWEEP_DIR_TAG = "ragtune.sweep_dir"  # on the parent: the sweep's folder
OVERRIDES_TAG = "ragtune.overrides"  # the job's Hydra overrides (hydra.overrides.task), shlex-joined
JOB_NUM_TAG = "ragtune.job_num"  # hydra.job.num: the job's place in override order
FAILED_JOBS_TAG = "ragtune.failed_jobs"  # on the parent: how many children did not finish
BASELINE_TAG = "ragtune.baseline"  # on the parent: the child the others were tested against

# --- study tags: an Optuna study's trials and parent --------------------------------------------------------
STUDY_PART_TAG = "ragtune.study.tuned_on"  # on a trial: dev (a test part was held out) or all
TEST_CHECKED_TAG = "ragtune.study.test_checked"  # on a dev trial also finished on test: that run
BEST_TRIAL_TAG = "ragtune.optuna.best_trial"  # on the parent: the best trial on the first objective
INTERRUPTED_TAG = "ragtune.optuna.interrupted"  # on the parent of a study stopped early: after how many

# --- model-version tags: set by `ragtune promote` (serving/promote.py) --------------------------------------
SOURCE_RUN_TAG = "ragtune.source_run"  # the run promoted
SWEEP_PARENT_TAG = "ragtune.sweep_parent"  # that run's sweep parent (its mlflow.parentRunId)
GATE_TAG = "ragtune.gate"  # the gate's verdict: passed, forced or first version
GATE_OVERRIDE_TAG = "ragtune.gate_override"  # true: --force promoted past a refusing gate
DATASET_CHANGED_TAG = "ragtune.dataset_changed"  # forced onto another data set than the alias's: both
TEST_SPLIT_WAIVED_TAG = "ragtune.test_split_waived"  # --no-test-split: the test-part check passed over
ACCESS_WIDENED_TAG = "ragtune.access_widened"  # --allow-wider-access: who sees more than before
# Run tags copied onto the version (run tag -> version tag): its lineage.
LINEAGE = {
    "mlflow.parentRunId": SWEEP_PARENT_TAG,
    GIT_COMMIT_TAG: GIT_COMMIT_TAG,
    PIPELINE_TAG: PIPELINE_TAG,
    DATASET_TAG: DATASET_TAG,
    DATASET_FINGERPRINT_TAG: DATASET_FINGERPRINT_TAG,
    INDEX_FINGERPRINT_TAG: INDEX_FINGERPRINT_TAG,
}

# --- trace tags: evaluation's question traces, and each served request's (serving/online/traces.py) ---------
QUESTION_TAG = "ragtune.question_id"  # on an evaluation trace: the golden question it answered
TRACE_TAG_PREFIX = "ragtune."  # every tag of a served request's trace starts with it
TRACE_CONTENT_TAG = "ragtune.content"  # what spans kept of texts (full, redacted, none): may harvest read
TRACE_REQUEST_ID_TAG = "ragtune.request_id"  # the request id the reply carried
TRACE_VARIANT_TAG = "ragtune.variant"  # the A/B variant (or shadow) that answered
TRACE_MODEL_VERSION_TAG = "ragtune.model_version"  # the registered version behind it
TRACE_SHADOW_TAG = "ragtune.shadow"  # true: a shadow's answer, which nobody saw or may rate
TRACE_TENANT_TAG = "ragtune.tenant"  # the asking principal's tenant, or anonymous
TRACE_STATUS_TAG = "ragtune.status"  # the reply's HTTP status
TRACE_REFUSED_TAG = "ragtune.refused"  # true: an error reply, or an answer that refused
TRACE_LATENCY_TAG = "ragtune.latency_ms"  # the request's latency
TRACE_SAMPLED_TAG = "ragtune.sampled"  # true: the trace kept the component spans (serve.trace.sample)
TRACE_DEGRADED_TAG = "ragtune.degraded"  # the retrieval paths dropped for the request (comma-separated), when any
TRACE_CACHED_TAG = "ragtune.cached"  # true: answered from serve.py's answer cache (serve.cache), no pipeline ran


def quality_tag(score: str) -> str:
    """The trace tag of a reply's reference-free quality score (citation_accuracy, unsupported_sentence_rate,
    top_score), which `ragtune online-report` and `ragtune harvest` read."""
    return f"{TRACE_TAG_PREFIX}{score}"


# --- run artifacts: what run.py logs to each run ------------------------------------------------------------
CONFIG_ARTIFACT = "config.yaml"  # the resolved config, for the record
PORTABLE_CONFIG = "config.portable.yaml"  # machine paths left symbolic: what promotion ships
PIPELINE_ARTIFACT = "pipeline.yaml"  # the Haystack pipeline, dumped
ERROR_ARTIFACT = "error.txt"  # a failed run's (or failed job's) traceback
ACCESS_FILE = "access.json"  # who may see each document of the index (access.py); bundles carry it
SKIPPED_FILES_ARTIFACT = "skipped_files.json"  # corpus files left out, each with its reason
DATASET_SOURCE_ARTIFACT = "dataset_source.json"  # where the data set came from
PER_QUESTION_TABLE_ARTIFACT = "per_question_table.json"  # the per-question records as a table for the UI

# --- a job's folder (hydra.run.dir), written by the runner --------------------------------------------------
PER_QUESTION_FILE = "per_question.jsonl"  # a record per question, logged too: compare and the gate pair on it
METRICS_FILE = "metrics.json"  # every metric, written after the records: the job finished
RUN_INFO_FILE = "run.json"  # the run id, experiment, tracking URI, dataset and index fingerprints
DIAGNOSIS_TABLE = "diagnosis.csv"  # the failure layer of each question, logged too
DIAGNOSIS_SUMMARY = "diagnosis.md"  # and their counts, logged too

# --- a sweep's folder (hydra.sweep.dir) and its parent run --------------------------------------------------
PARENT_FILE = "mlflow_parent_run.json"  # the parent run each job of the sweep logs under
FAILURES_FILE = "failed_jobs.txt"  # on the parent: the jobs that did not finish, and why
COMPARISON_CHART = "comparison.png"  # the finished children compared (their figures' CSV beside it)


@dataclass(frozen=True)
class JobFolder:
    """A run.py job's folder: the runner writes it, the Optuna study and the benchmarks read it back."""

    path: Path

    @property
    def finished(self) -> bool:
        """Whether the job wrote its metrics (after its per-question records): a job without them failed."""
        return (self.path / METRICS_FILE).is_file()

    def metrics(self) -> dict[str, float]:
        """The metrics as written (counts stay JSON integers)."""
        return json.loads((self.path / METRICS_FILE).read_text(encoding="utf-8"))

    def run_info(self) -> dict[str, str]:
        return json.loads((self.path / RUN_INFO_FILE).read_text(encoding="utf-8"))

    @property
    def run_id(self) -> str | None:
        """The MLflow run the job logged into, or None when it recorded none."""
        return self.run_info().get("run_id") if (self.path / RUN_INFO_FILE).is_file() else None

    def per_question(self) -> list[dict[str, Any]] | None:
        """The per-question records, or None when the job wrote none."""
        path = self.path / PER_QUESTION_FILE
        if not path.is_file():
            return None
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]

    def write_per_question(self, records: Iterable[Mapping[str, Any]]) -> Path:
        path = self.path / PER_QUESTION_FILE
        with path.open("w", encoding="utf-8") as f:
            for record in records:
                f.write(json.dumps(record, ensure_ascii=False) + "\n")
        return path

    def write_metrics(self, metrics: Mapping[str, float]) -> None:
        (self.path / METRICS_FILE).write_text(json.dumps(metrics, indent=2, sort_keys=True), encoding="utf-8")

    def write_run_info(self, info: Mapping[str, str]) -> None:
        (self.path / RUN_INFO_FILE).write_text(json.dumps(info, indent=2), encoding="utf-8")
