import mlflow
import pytest
from haystack import Document, Pipeline, tracing
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.dataclasses import ChatMessage
from haystack.document_stores.in_memory import InMemoryDocumentStore

from experiments.evaluation.mlflow_traces import QuestionTraces, sampled_indices
from pipelines.instrumentation import timing_components
from pipelines.run_layout import QUESTION_TAG


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


def test_sampled_questions_become_tagged_traces_of_the_run_and_the_rest_are_not_traced(tmp_path, mlflow_store):
    _, client, experiment = mlflow_store
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
    assert set(spans) == {"haystack.pipeline.run", "bm25"} and spans["bm25"].span_type == "RETRIEVER"
    assert spans["bm25"].parent_id == spans["haystack.pipeline.run"].span_id
    returned = spans["bm25"].outputs["documents"]  # content is traced, lean: what the stage returned
    assert returned and all(set(d) == {"id", "score", "span", "text"} for d in returned) and returned[0]["text"]
    pipeline.run({"bm25": {"query": "leave"}})  # tracing is off again after the block
    assert len(mlflow.search_traces(locations=[experiment], return_type="list")) == 2


@pytest.mark.usefixtures("mlflow_store")
def test_without_an_active_run_nothing_is_traced(tmp_path):
    with timing_components() as timer, QuestionTraces(sample=5, total=2, timer=timer) as traces:
        assert traces.indices == set()
        with traces.question(0, "q0"):
            bm25_pipeline().run({"bm25": {"query": "leave"}})
    assert traces.trace_ids == {}


def test_a_lean_trace_keeps_ids_scores_spans_and_the_start_of_the_text_and_full_keeps_all():
    from pipelines.instrumentation import MAX_DOCUMENTS, TEXT_CHARS, lean

    documents = [Document(id=f"d#{i}-{i + 9}", content="x" * 500, score=1 / (i + 1), embedding=[0.1] * 384,
                          meta={"span": [i, i + 9], "tenant": "acme"}) for i in range(12)]
    shown = lean({"documents": documents, "query": "q" * 5000, "query_embedding": [0.5] * 384})
    assert shown["documents"][0] == {"id": "d#0-9", "score": 1.0, "span": [0, 9],
                                     "text": "x" * TEXT_CHARS + f"... (+{500 - TEXT_CHARS} chars)"}
    assert shown["documents"][3] == "d#3-12 0.25" and len(shown["documents"]) == MAX_DOCUMENTS + 1
    assert shown["documents"][-1] == "... 7 more documents (per_question.jsonl lists them all)"
    assert shown["query"].endswith("... (+3000 chars)") and shown["query_embedding"] == "<384 numbers>"


def test_a_traced_question_stays_under_50_kb_even_on_long_chinese_documents(tmp_path, mlflow_store):
    """Two retrievers' 50 candidates of 2,000 Han characters each: kept whole, that is about 1.2 MB of spans."""
    _, _, experiment = mlflow_store
    store = InMemoryDocumentStore()
    store.write_documents([Document(content=f"年假规定第{i}条。" + "员工年假天数按工龄计算。" * 170, meta={"span": [0, 2000]})
                           for i in range(60)])
    pipeline = Pipeline()
    pipeline.add_component("bm25", InMemoryBM25Retriever(store, top_k=50))
    pipeline.add_component("again", InMemoryBM25Retriever(store, top_k=50))
    with (
        mlflow.start_run(experiment_id=experiment),
        timing_components() as timer,
        QuestionTraces(sample=1, total=1, timer=timer) as traces,
        traces.question(0, "q0"),
    ):
        pipeline.run({"bm25": {"query": "年假"}, "again": {"query": "工龄"}})
    [trace] = mlflow.search_traces(locations=[experiment], return_type="list")
    assert len(trace.data.spans) == 3 and len(trace.to_json()) <= 50_000, len(trace.to_json())


def test_an_agents_trace_shows_each_steps_call_with_its_tokens_and_each_tool_with_its_arguments_and_result(
    tmp_path, mlflow_store
):
    """A scripted model (control flow; the real SmolLM2 agent's trace is checked in tests/test_run.py) calls
    sql_query, then final_answer."""
    from haystack.components.agents import Agent

    from components.tools.sql_query import SqlQuery
    from experiments.datasets.demo import DEMO_DIR
    from pipelines.agent_tools import STATE_SCHEMA, final_answer_tool, sql_query_tool
    from tests.support.scripted_chat_generator import ScriptedChatGenerator, call

    _, _, experiment = mlflow_store
    sql = SqlQuery(database=str(DEMO_DIR / "sql" / "company.sql"), cache_dir=str(tmp_path))
    sql.warm_up()
    model = ScriptedChatGenerator("", first=[
        call("sql_query", query="SELECT annual_days FROM leave_allowance WHERE office = 'AUS' AND grade = 5"),
        call("final_answer", answer="20 days [sql:leave_allowance/13]", citations=["sql:leave_allowance/13"]),
    ])
    pipeline = Pipeline()
    pipeline.add_component("agent", Agent(chat_generator=model, tools=[sql_query_tool(sql, "SQL"), final_answer_tool()],
                                          exit_conditions=["final_answer"], state_schema=STATE_SCHEMA))
    with (
        mlflow.start_run(experiment_id=experiment),
        timing_components() as timer,
        QuestionTraces(sample=1, total=1, timer=timer) as traces,
        traces.question(0, "q0"),
    ):
        pipeline.run({"agent": {"messages": [ChatMessage.from_user("Grade-5 leave in Austin?")]}})
    [trace] = mlflow.search_traces(locations=[experiment], return_type="list")
    steps = [s for s in trace.data.spans if s.name == "haystack.agent.step.llm"]
    tools = [s for s in trace.data.spans if s.name == "haystack.agent.step.tool"]
    assert len(steps) == 2 and all(s.span_type == "CHAT_MODEL" for s in steps)
    (reply,) = steps[0].outputs["replies"]
    assert reply["tool_calls"] == [{"tool": "sql_query", "arguments": {
        "query": "SELECT annual_days FROM leave_allowance WHERE office = 'AUS' AND grade = 5"}}]
    assert reply["usage"] == {"prompt_tokens": 11, "completion_tokens": 5}
    assert steps[0].inputs["tools"] == ["sql_query", "final_answer"]
    assert [s.span_type for s in tools] == ["TOOL", "TOOL"]
    assert tools[0].inputs == {"query": "SELECT annual_days FROM leave_allowance WHERE office = 'AUS' AND grade = 5"}
    assert tools[0].outputs["citations"] == ["sql:leave_allowance/13"]
