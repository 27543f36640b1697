from haystack import Document
from haystack.dataclasses import ChatMessage, ToolCall

from components.agents.agent_answer import AgentAnswer
from pipelines.answer_contract import check_answer

REFUSALS = {"en": "I cannot answer this from the provided documents.", "zh": "根据提供的资料无法回答。"}
LEAVE = Document(id="c1", content="Up to 5 unused days may be carried over into the next year.",
                 meta={"doc_id": "en/leave_policy.md", "span": [10, 70]})
ROW = Document(id="sql:leave_allowance/21", content="leave_allowance\nid: 21\noffice: SHA\ngrade: 5\nannual_days: 10",
               meta={"doc_id": "sql:leave_allowance/21", "source": "sql"})


def _calls(*calls: ToolCall) -> list[ChatMessage]:
    return [ChatMessage.from_user("q"), *(ChatMessage.from_assistant(tool_calls=[c]) for c in calls)]


def _run(messages, exit_reason="final_answer", documents=(LEAVE, ROW, LEAVE), query="How many days carry over?"):
    return AgentAnswer(REFUSALS).run(
        query=query, messages=messages, exit_reason=exit_reason, step_count=len(messages) - 1,
        tool_call_counts={"kb_search": 1, "final_answer": 1}, documents=list(documents),
        token_usage={"prompt_tokens": 300, "completion_tokens": 40, "model": "x"},
    )


def test_the_final_answer_is_checked_against_what_the_tools_returned():
    messages = _calls(ToolCall(tool_name="kb_search", arguments={"query": "carry over"}),
                      ToolCall(tool_name="final_answer", arguments={
                          "answer": "Up to 5 unused days carry over.",
                          "citations": ["en/leave_policy.md", "[sql:leave_allowance/21]", "en/other.md"]}))
    out = _run(messages)
    (answer,) = out["answers"]
    check_answer(answer, "answer")
    assert answer.data == "Up to 5 unused days carry over. [1, 2]"
    assert [c["doc_id"] for c in answer.meta["citations"]] == ["en/leave_policy.md", "sql:leave_allowance/21"]
    assert answer.meta["unknown_citations"] == ["en/other.md"]
    assert answer.meta["refused"] is False and answer.meta["unsupported_sentences"] == []
    assert answer.meta["agent"] == {"steps": 2, "tools": ["kb_search", "final_answer"],
                                    "tool_calls": {"kb_search": 1, "final_answer": 1}, "stop_reason": "final_answer"}
    assert answer.meta["usage"] == {"prompt_tokens": 300, "completion_tokens": 40}
    assert [d.id for d in out["documents"]] == ["c1", "sql:leave_allowance/21"]  # each once, in order


def test_an_answer_its_citations_do_not_support_is_flagged():
    messages = _calls(ToolCall(tool_name="final_answer", arguments={
        "answer": "Interns get 30 days of parental leave.", "citations": ["en/leave_policy.md"]}))
    (answer,) = _run(messages)["answers"]
    assert answer.meta["unsupported_sentences"] == ["Interns get 30 days of parental leave."]


def test_a_run_stopped_by_a_safeguard_is_an_honest_refusal_that_says_why():
    messages = _calls(ToolCall(tool_name="kb_search", arguments={"query": "x"}),
                      ToolCall(tool_name="kb_search", arguments={"query": "x"}))
    (answer,) = _run(messages, exit_reason="repeated_call", query="年假能顺延吗？")["answers"]
    check_answer(answer, "answer")
    assert answer.data == "根据提供的资料无法回答。 (repeated tool call)"
    assert answer.meta["refused"] is True and answer.meta["refusal_reason"] == "agent_repeated_call"
    assert answer.meta["agent"]["stop_reason"] == "repeated_call"


def test_a_final_answer_that_refuses_counts_as_a_refusal():
    messages = _calls(ToolCall(tool_name="final_answer", arguments={"answer": REFUSALS["en"], "citations": []}))
    (answer,) = _run(messages)["answers"]
    assert answer.meta["refused"] is True and answer.data == REFUSALS["en"]


def test_to_dict():
    assert AgentAnswer(REFUSALS, ["cannot"], 0.4).to_dict() == {
        "type": "components.agents.agent_answer.AgentAnswer",
        "init_parameters": {"refusals": REFUSALS, "refusal_patterns": ["cannot"], "support_threshold": 0.4},
    }
