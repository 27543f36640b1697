import pytest

from experiments.evaluation.agent_metrics import ENDINGS, agent_scores, agent_summary


def _meta(reason, steps, calls):
    return {"agent": {"steps": steps, "tools": [], "tool_calls": calls, "stop_reason": reason}}


def test_each_question_scores_every_ending_so_the_means_are_shares():
    answered = agent_scores(_meta("final_answer", 2, {"kb_search": 1, "final_answer": 1}))
    looped = agent_scores(_meta("repeated_call", 3, {"kb_search": 3, "final_answer": 0}))
    assert {k for k in answered if k.startswith("agent/stop_reason/")} == {f"agent/stop_reason/{e}" for e in ENDINGS}
    summary = agent_summary([answered, looped, {"answer/f1": 1.0}])  # a question no agent answered is left out
    assert summary["agent/steps_per_question"] == 2.5
    assert summary["agent/stop_reason/final_answer"] == summary["agent/stop_reason/repeated_call"] == 0.5
    assert summary["agent/tool_calls/kb_search"] == 2.0 and summary["agent/tool_calls/final_answer"] == 0.5
    assert summary["agent/loop_aborts"] == 1.0


def test_an_unknown_ending_is_kept_and_answers_without_an_agent_score_nothing():
    assert agent_scores(_meta("custom_hook", 1, {}))["agent/stop_reason/custom_hook"] == 1.0
    assert agent_scores({"refused": False}) == {} and agent_summary([{"answer/f1": 1.0}]) == {}


@pytest.mark.parametrize("reason", ["repeated_call", "max_agent_steps"])
def test_loops_are_counted_as_aborts(reason):
    assert agent_scores(_meta(reason, 6, {}))["agent/loop_aborted"] == 1.0
