import mlflow
from haystack import Document, Pipeline, tracing
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.document_stores.in_memory import InMemoryDocumentStore

from experiments.mlflow_traces import QUESTION_TAG, QuestionTraces, sampled_indices
from experiments.tracing import timing_components
from tests.experiments.mlflow_runs import tracking


def test_sampled_indices_spread_over_the_set():
    assert sampled_indices(3, 9) == {0, 4, 8}
    assert sampled_indices(20, 3) == {0, 1, 2}
    assert sampled_indices(0, 9) == set() and sampled_indices(5, 0) == set()


def bm25_pipeline() -> Pipeline:
    store = InMemoryDocumentStore()
    store.write_documents([Document(content=text) for text in ("annual leave days", "parking permits", "kitchen")])
    pipeline = Pipeline()
    pipeline.add_component("bm25", InMemoryBM25Retriever(store, top_k=2))
    return pipeline


def test_sampled_questions_become_tagged_traces_of_the_run_and_the_rest_are_not_traced(tmp_path):
    _, client, experiment = tracking(tmp_path)
    pipeline = bm25_pipeline()
    questions = [("q0", "leave"), ("q1", "parking"), ("q2", "kitchen"), ("q3", "leave days")]
    timed, content = [], []
    with (
        mlflow.start_run(experiment_id=experiment) as run,
        timing_components() as timer,
        QuestionTraces(sample=2, total=len(questions), timer=timer) as traces,
    ):
        for index, (question_id, text) in enumerate(questions):
            with traces.question(index, question_id):
                pipeline.run({"bm25": {"query": text}})
                content.append(tracing.tracer.is_content_tracing_enabled)
            timed.append(timer.take().calls)
    assert timed == [{"bm25": 1}] * 4  # the component timer keeps timing every question, traced or not
    # inputs and outputs are recorded for the traced questions only, and the flag is as it was afterwards
    assert content == [True, False, False, True] and tracing.tracer.is_content_tracing_enabled is False
    logged = mlflow.search_traces(locations=[experiment], run_id=run.info.run_id, return_type="list")
    assert sorted(t.info.tags[QUESTION_TAG] for t in logged) == ["q0", "q3"]
    spans = {s.name: s for s in logged[0].data.spans}
    assert "haystack.pipeline.run" in spans and "InMemoryBM25Retriever" in spans
    assert spans["InMemoryBM25Retriever"].outputs["documents"]  # content is traced: what the stage returned
    pipeline.run({"bm25": {"query": "leave"}})  # tracing is off again after the block
    assert len(mlflow.search_traces(locations=[experiment], return_type="list")) == 2


def test_without_an_active_run_nothing_is_traced(tmp_path):
    tracking(tmp_path)
    with timing_components() as timer, QuestionTraces(sample=5, total=2, timer=timer) as traces:
        assert traces.indices == set()
        with traces.question(0, "q0"):
            bm25_pipeline().run({"bm25": {"query": "leave"}})
    assert traces.trace_ids == {}
