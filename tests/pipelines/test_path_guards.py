"""`path_guards`: a hybrid whose remote query embedder is down answers from BM25, says `degraded`, and the run
records it per question and as retrieval/degraded_rate. Real parts: Haystack's OpenAITextEmbedder on a port where
nothing listens."""

from dataclasses import replace

import pytest
from haystack.document_stores.in_memory import InMemoryDocumentStore
from haystack.document_stores.types import DuplicatePolicy

from experiments.datasets.golden.items import EvidenceSpan, GoldenItem
from experiments.evaluation.evaluate import evaluate
from experiments.evaluation.settings import EvalSettings
from experiments.runs.config import validate
from pipelines.builder import build_pipeline
from pipelines.errors import ConfigError
from pipelines.spec import PipelineConfigError
from tests.support.handbook import LEAVE
from tests.support.handbook import store as handbook
from tests.support.shipped import composed

DOWN = "http://127.0.0.1:9/v1"  # the discard port: connection refused at once


def hybrid(paths: dict | None = None, embedder_url: str = DOWN) -> dict:
    return {
        "components": {
            "bm25": {"_target_": "components.retrievers.bm25_retriever.BM25sRetriever", "document_store": "@store"},
            "query_embedder": {
                "_target_": "haystack.components.embedders.OpenAITextEmbedder", "api_base_url": embedder_url,
                "api_key": {"_target_": "haystack.utils.Secret.from_token", "token": "none"}, "max_retries": 0,
            },
            "dense": {"_target_": "components.retrievers.embedding_retriever.MatrixEmbeddingRetriever",
                      "document_store": "@store"},
            "fusion": {"_target_": "components.joiners.rank_fusion_joiner.RankFusionJoiner", "paths": ["bm25", "dense"]},
        },
        "connections": [["query_embedder.embedding", "dense.query_embedding"], ["bm25.documents", "fusion.bm25"],
                        ["dense.documents", "fusion.dense"]],
        "inputs": {"question": ["bm25.query", "query_embedder.text", "fusion.query"],
                   "filters": ["bm25.filters", "dense.filters"]},
        "path_guards": {"joiner": "fusion", "paths": paths or {}},
        "retrieval_output": "fusion.documents",
    }


def store() -> tuple[InMemoryDocumentStore, dict]:
    """The handbook, its chunks with vectors (the dense path's index is built when it warms up)."""
    memory, chunks = handbook()
    memory.write_documents([replace(d, embedding=[1.0, 0.0]) for d in memory.filter_documents()],
                           policy=DuplicatePolicy.OVERWRITE)
    return memory, chunks


def built(spec: dict, memory: InMemoryDocumentStore):
    query = build_pipeline(spec, {"store": memory}, input_names=("question", "history", "filters"))
    query.warm_up()
    return query


def test_a_path_whose_embedder_is_down_is_dropped_and_bm25_answers():
    memory, _ = store()
    query = built(hybrid({"dense": {"timeout_s": 5.0}}), memory)
    assert {name for name, _ in query.pipeline.walk()} == {"bm25", "dense", "fusion"}  # the embedder is in dense
    outputs = query.run(question="How many days of annual leave?")
    assert query.degraded(outputs) == ["dense"]
    assert [d.content for d in query.documents_at(outputs, query.retrieval_output)][:1] == [LEAVE]


def test_the_run_records_the_dropped_paths_per_question_and_their_rate():
    memory, chunks = store()
    golden = [GoldenItem(id="q1", question="How many days of annual leave?", evidence=(LEAVE,),
                         evidence_spans=((EvidenceSpan("leave", 0, len(LEAVE)),),))]
    result = evaluate(built(hybrid(), memory), golden, EvalSettings(ks=[1]), chunks, progress=False)
    assert result.metrics["retrieval/degraded_rate"] == 1.0
    assert result.per_question[0].extras["degraded"] == ["dense"]
    assert result.per_question[0].scores["retrieval/degraded"] == 1.0


def test_a_path_setting_for_no_path_of_the_fusion_names_its_key():
    with pytest.raises(PipelineConfigError, match=r"retriever.paths.web: no such path; fusion's paths are"):
        build_pipeline(hybrid({"web": {"timeout_s": 1.0}}), {"store": store()[0]})


def test_a_path_timeout_is_checked_before_anything_is_built():
    with pytest.raises(ConfigError, match=r"retriever.paths.dense.timeout_s': must be null or > 0"):
        validate(composed("retriever.paths.dense.timeout_s=0"))


def test_a_degraded_output_the_pipeline_lacks_names_its_key():
    memory, _ = store()
    spec = hybrid() | {"degraded_output": "fusion.dropped"}
    with pytest.raises(PipelineConfigError, match=r"pipeline.degraded_output: component 'fusion' .* has no output 'dropped'"):
        build_pipeline(spec, {"store": memory}, input_names=("question", "history", "filters"))
