"""The agent's safeguards on Haystack's Agent: scripted control flow here, real SmolLM2 in
test_json_tool_chat_generator.py."""

import pytest
from haystack.components.agents import Agent
from haystack.dataclasses import ChatMessage
from haystack.tools import Tool

from components.agents.deadline_hook import DeadlineHook
from components.agents.repeated_call_hook import RepeatedCallHook, normalised_call
from tests.support.scripted_chat_generator import ScriptedChatGenerator, call

LOOKUP = Tool(name="lookup", description="Look a term up.", function=lambda term: f"{term}: 20 days",
              parameters={"type": "object", "properties": {"term": {"type": "string"}}, "required": ["term"]})
DONE = Tool(name="done", description="Answer.", function=lambda answer: answer,
            parameters={"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]})


def _run(replies, **agent_kwargs):
    generator = ScriptedChatGenerator("", first=replies)
    agent = Agent(chat_generator=generator, tools=[LOOKUP, DONE], exit_conditions=["done"], max_agent_steps=6,
                  **agent_kwargs)
    return agent.run(messages=[ChatMessage.from_user("How much leave?")]), generator


def test_a_repeated_call_ends_the_run_before_the_next_model_call():
    out, generator = _run(
        [call("lookup", term="annual leave"), call("lookup", term="  Annual   LEAVE"), call("done", answer="20")],
        hooks={"before_tool": [RepeatedCallHook()]},
    )
    assert (out["exit_reason"], out["step_count"], generator.calls) == ("repeated_call", 2, 2)


def test_different_calls_run_on_to_the_answer():
    out, _ = _run([call("lookup", term="annual leave"), call("lookup", term="sick leave"), call("done", answer="20")],
                  hooks={"before_tool": [RepeatedCallHook()]})
    assert (out["exit_reason"], out["tool_call_counts"]) == ("done", {"lookup": 2, "done": 1})


def test_calls_that_differ_only_in_form_are_the_same_call():
    assert normalised_call("q", {"b": 1, "a": "SELECT  x"}) == normalised_call("q", {"a": "select x", "b": 1})
    assert normalised_call("q", {"a": "ＳＥＬＥＣＴ x"}) == normalised_call("q", {"a": "select x"})
    assert normalised_call("q", {"a": "x"}) != normalised_call("r", {"a": "x"})


def test_past_its_deadline_the_run_stops_before_calling_the_model():
    deadline = DeadlineHook(seconds=1e-9)
    out, generator = _run([call("done", answer="20")], state_schema={"deadline": {"type": float}},
                          hooks={"before_run": [deadline], "before_llm": [deadline]})
    assert (out["exit_reason"], generator.calls) == ("timeout", 0)


def test_within_its_deadline_the_run_goes_on():
    deadline = DeadlineHook(seconds=3600)
    out, _ = _run([call("done", answer="20")], state_schema={"deadline": {"type": float}},
                  hooks={"before_run": [deadline], "before_llm": [deadline]})
    assert out["exit_reason"] == "done"


def test_hooks_serialise():
    assert DeadlineHook(seconds=30).to_dict() == {
        "type": "components.agents.deadline_hook.DeadlineHook", "init_parameters": {"seconds": 30}}
    assert RepeatedCallHook().to_dict() == {
        "type": "components.agents.repeated_call_hook.RepeatedCallHook", "init_parameters": {}}
    with pytest.raises(ValueError, match="seconds must be > 0"):
        DeadlineHook(seconds=0)
