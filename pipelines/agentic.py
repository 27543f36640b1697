"""`pipeline=agentic`: Haystack's `Agent` with kb_search over a retrieval pipeline, optional read-only SQL, and
final_answer, bounded by steps, a token budget, a deadline and repeated-call detection."""

from __future__ import annotations

import warnings
from typing import Any

from haystack import Pipeline, SuperComponent
from haystack.components.agents import Agent
from haystack.hooks.budget import TokenBudgetHook
from haystack.utils.experimental import ExperimentalWarning

from components.agents.agent_answer import FINAL_ANSWER, AgentAnswer
from components.agents.deadline_hook import DeadlineHook
from components.agents.json_tool_chat_generator import JsonToolChatGenerator
from components.agents.native_tool_calls import NativeToolCalls
from components.agents.repeated_call_hook import RepeatedCallHook
from components.agents.scoped_query import ScopedQuery
from components.context.context_window import ContextWindow
from components.tools.sql_query import SqlQuery
from pipelines.agent_floor import FloorSearchHook
from pipelines.agent_tools import STATE_SCHEMA, final_answer_tool, kb_search_tool, sql_query_tool
from pipelines.built import BuiltPipeline
from pipelines.spec import PipelineConfigError

# The socket of agentic.yaml's floor_answer subpipeline that receives the run's context.
FLOOR_PASSAGES = "passages.documents"


def rag_agent(
    chat_generator: Any,
    search: BuiltPipeline,
    system_prompt: str,
    search_description: str,
    refusals: dict[str, str],
    sql_database: str | None = None,
    sql_cache_dir: str | None = None,
    native_tool_calls: bool = False,
    first_tool: str | None = None,
    floor_search: bool = True,
    passages: int = 3,
    step_max_tokens: int = 512,
    max_agent_steps: int = 6,
    max_total_tokens: int = 20_000,
    timeout_s: float = 120.0,
) -> Agent:
    """The agent of `pipeline=agentic`, built from config.

    :param chat_generator: The model that picks each step; without native tool calls (llama.cpp) it is held to the
        tools' JSON schema by JsonToolChatGenerator.
    :param search: The retrieval pipeline behind kb_search (its context view is what a search returns).
    :param system_prompt: The agent's instructions; `{refusal}` becomes the English refusal sentence.
    :param refusals: Language -> the refusal sentence.
    :param sql_database: A SQLite file or `.sql` script for the read-only sql_query tool; None: documents only.
    :param native_tool_calls: The chat generator calls tools itself (an OpenAI-compatible endpoint).
    :param first_tool: The only tool the model's first step may call; None: the model chooses.
    :param floor_search: Before the model's first step, search the question verbatim (pipelines/agent_floor.py),
        so the run retrieves at least what `search` alone does; the model's calls can only add to it.
    :param passages: Passages a search returns (the first of the search pipeline's context).
    :param step_max_tokens: Tokens a step's call may take under the JSON schema (not for native tool calls).
    """
    if max_agent_steps < 1 or max_total_tokens < 1 or timeout_s <= 0:
        raise PipelineConfigError("pipeline.components.agent: max_agent_steps, max_total_tokens and timeout_s must "
                                  f"be positive, got {max_agent_steps}, {max_total_tokens}, {timeout_s}")
    pipeline, documents = scoped_search(search, passages)
    dropped = None if search.degraded_output is None else str(search.degraded_output)
    tools = [kb_search_tool(pipeline, documents, search_description, degraded_output=dropped)]
    deadline = DeadlineHook(seconds=timeout_s)
    before_run: list[Any] = [deadline]  # the floor's search counts against the deadline
    if floor_search:
        before_run.append(
            FloorSearchHook(kb_search_tool(pipeline, documents, search_description, ranking(search), dropped))
        )
    if sql_database is not None:
        sql = SqlQuery(database=sql_database, cache_dir=sql_cache_dir)
        sql.warm_up()  # opens the file read-only and reads its schema, which the tool's description names
        tools.append(sql_query_tool(sql, f"Run one read-only SQLite SELECT. Tables: {sql.schema_text()}."))
    tools.append(final_answer_tool())
    with warnings.catch_warnings():  # Haystack marks its token budget experimental; ragtune pins Haystack 3.4
        warnings.simplefilter("ignore", ExperimentalWarning)
        budget = TokenBudgetHook(max_total_tokens=max_total_tokens)
    return Agent(
        chat_generator=step_generator(chat_generator, native_tool_calls, first_tool, step_max_tokens),
        tools=tools,
        system_prompt=system_prompt.replace("{refusal}", refusals.get("en", "")),
        exit_conditions=[FINAL_ANSWER],
        state_schema=STATE_SCHEMA,
        max_agent_steps=max_agent_steps,
        hooks={"before_run": before_run, "before_llm": [deadline, budget], "before_tool": [RepeatedCallHook()]},
    )


def agent_answer(
    refusals: dict[str, str],
    refusal_patterns: list[str] | None = None,
    support_threshold: float = 0.5,
    floor_answer: BuiltPipeline | None = None,
) -> AgentAnswer:
    """The agent's AgentAnswer; `floor_answer` (the answer stage behind a pass-through `passages.documents`, as
    agentic.yaml's subpipeline) answers a run whose model stopped without a final answer."""
    floor = None
    if floor_answer is not None:
        if floor_answer.answer_output is None or "question" not in floor_answer.inputs:
            raise PipelineConfigError(f"pipeline '{floor_answer.name}' (floor_answer): it needs an answer stage, which "
                                      f"takes the question; set pipeline.components.answer.floor_answer=null")
        floor = SuperComponent(
            pipeline=floor_answer.pipeline,
            input_mapping={"query": [str(s) for s in floor_answer.inputs["question"]], "documents": [FLOOR_PASSAGES]},
            output_mapping={str(floor_answer.answer_output): "answers"},
        )
    return AgentAnswer(refusals, refusal_patterns, support_threshold, floor)


def step_generator(chat_generator: Any, native_tool_calls: bool, first_tool: str | None, step_max_tokens: int) -> Any:
    """What writes each step: the model itself where it calls tools (an endpoint), else held to the tools' JSON
    schema; either way held to `first_tool` on the first step when one is named."""
    if not native_tool_calls:
        return JsonToolChatGenerator(
            chat_generator=chat_generator, generation_kwargs={"max_tokens": step_max_tokens}, first_tool=first_tool
        )
    return NativeToolCalls(chat_generator, first_tool)


def ranking(search: BuiltPipeline) -> str:
    """The socket of the search pipeline's whole retrieval ranking, which the floor search reports."""
    if search.retrieval_output is None:
        raise PipelineConfigError(f"pipeline '{search.name}' (kb_search): it has no retrieval_output for the floor "
                                  f"search to report; set pipeline.components.agent.floor_search=false")
    return str(search.retrieval_output)


def scoped_search(search: BuiltPipeline, passages: int) -> tuple[Pipeline, str]:
    """The retrieval pipeline with a ScopedQuery named `scope` in front of its question and filters inputs, and its
    context view cut to the first `passages` (`window`): what a search returns."""
    context = search.context_output
    if context is None:
        raise PipelineConfigError(f"pipeline '{search.name}' (kb_search): it has no context_output to return")
    if "filters" not in search.inputs:
        raise PipelineConfigError(f"pipeline '{search.name}' (kb_search): it takes no filters, so a search could "
                                  f"not be scoped to the request")
    pipeline = search.pipeline
    pipeline.add_component("scope", ScopedQuery())
    for socket in search.inputs["question"]:
        pipeline.connect("scope.query", str(socket))
    for socket in search.inputs["filters"]:
        pipeline.connect("scope.filters", str(socket))
    pipeline.add_component("window", ContextWindow(top_k=passages))
    pipeline.connect(str(context), "window.documents")
    return pipeline, "window.documents"
