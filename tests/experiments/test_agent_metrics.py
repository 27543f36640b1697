import pytest

from experiments.evaluation.agent_metrics import (
    ENDINGS,
    agent_failure,
    agent_scores,
    agent_summary,
    tool_choice_scores,
)


def _meta(reason, steps, calls, tools=(), answered_by="model"):
    return {"agent": {"steps": steps, "tools": list(tools), "tool_calls": calls, "stop_reason": reason,
                      "answered_by": answered_by}}


def _called(*tools):
    return _meta("final_answer", len(tools), {}, [*tools, "final_answer"])


def test_each_question_scores_every_ending_so_the_means_are_shares():
    answered = agent_scores(_meta("final_answer", 2, {"kb_search": 1, "final_answer": 1}))
    looped = agent_scores(_meta("repeated_call", 3, {"kb_search": 3, "final_answer": 0}, answered_by="floor"))
    assert {k for k in answered if k.startswith("agent/stop_reason/")} == {f"agent/stop_reason/{e}" for e in ENDINGS}
    summary = agent_summary([answered, looped, {"answer/f1": 1.0}])  # a question no agent answered is left out
    assert summary["agent/steps_per_question"] == 2.5
    assert summary["agent/stop_reason/final_answer"] == summary["agent/stop_reason/repeated_call"] == 0.5
    assert summary["agent/tool_calls/kb_search"] == 2.0 and summary["agent/tool_calls/final_answer"] == 0.5
    assert summary["agent/loop_aborts"] == 1.0
    assert summary["agent/answered_by/model"] == summary["agent/answered_by/floor"] == 0.5
    assert summary["agent/answered_by/none"] == 0.0


def test_an_unknown_ending_is_kept_and_answers_without_an_agent_score_nothing():
    assert agent_scores(_meta("custom_hook", 1, {}))["agent/stop_reason/custom_hook"] == 1.0
    assert agent_scores({"refused": False}) == {} and agent_summary([{"answer/f1": 1.0}]) == {}


@pytest.mark.parametrize("reason", ["repeated_call", "max_agent_steps"])
def test_loops_are_counted_as_aborts(reason):
    assert agent_scores(_meta(reason, 6, {}))["agent/loop_aborted"] == 1.0


@pytest.mark.parametrize(("tools", "expected", "choice", "sequence"), [
    (["sql_query"], ["sql_query"], 1.0, 1.0),
    (["sql_query", "sql_query"], ["sql_query"], 1.0, 1.0),  # repeating a tool is still the right choice
    (["kb_search", "sql_query", "kb_search"], ["sql_query", "kb_search"], 1.0, 0.0),  # right tools, wrong order
    (["kb_search"], ["sql_query"], 0.0, 0.0),
    (["sql_query", "kb_search"], ["sql_query"], 0.0, 0.0),  # a tool the question does not need
    ([], ["kb_search"], 0.0, 0.0),  # answered from nothing
])
def test_tool_choice_is_the_set_of_tools_called_and_sequence_their_first_calls(tools, expected, choice, sequence):
    scores = tool_choice_scores(_called(*tools), expected)
    assert scores == {"agent/tool_choice_correct": choice, "agent/tool_sequence_correct": sequence}


def test_tool_choice_is_averaged_over_the_items_that_name_their_tools_only():
    right = agent_scores(_called("sql_query")) | tool_choice_scores(_called("sql_query"), ["sql_query"])
    wrong = agent_scores(_called("kb_search")) | tool_choice_scores(_called("kb_search"), ["sql_query"])
    unnamed = agent_scores(_called("kb_search")) | tool_choice_scores(_called("kb_search"), [])
    summary = agent_summary([right, wrong, unnamed])
    assert summary["agent/tool_choice_accuracy"] == summary["agent/tool_sequence_accuracy"] == 0.5
    assert "agent/tool_choice_accuracy" not in agent_summary([unnamed])
    assert tool_choice_scores({"refused": False}, ["sql_query"]) == {}


@pytest.mark.parametrize(("meta", "expected", "why"), [
    (_meta("repeated_call", 3, {}, ["kb_search"] * 3), ["kb_search"], "loop (repeated_call)"),
    (_meta("max_agent_steps", 6, {}), [], "loop (max_agent_steps)"),
    (_meta("timeout", 2, {}), ["kb_search"], "budget (timeout)"),
    (_meta("length", 2, {}), [], "budget (length)"),
    (_meta("text", 1, {}), [], "no tool call"),
    (_called("kb_search"), ["sql_query"], "wrong tools: called ['kb_search'], needed ['sql_query']"),
    (_called(), ["sql_query"], "wrong tools: called none, needed ['sql_query']"),
    (_called("sql_query", "kb_search"), ["sql_query", "kb_search"], None),
    (_called("kb_search"), [], None),  # no expectation: any tool will do
    ({"refused": True}, ["kb_search"], None),  # no agent ran
])
def test_agent_failure_says_what_the_agent_did_wrong(meta, expected, why):
    assert agent_failure(meta, expected) == why
