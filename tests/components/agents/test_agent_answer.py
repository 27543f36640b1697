from haystack import Document, Pipeline, SuperComponent
from haystack.dataclasses import ChatMessage, ToolCall

from components.agents.agent_answer import AgentAnswer
from components.answer.citation_verifier import CitationVerifier
from components.answer.extractive_answerer import ExtractiveAnswerer
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
                                    "tool_calls": {"kb_search": 1, "final_answer": 1}, "stop_reason": "final_answer",
                                    "answered_by": "model"}
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
    assert answer.meta["agent"]["stop_reason"] == "repeated_call" and answer.meta["agent"]["answered_by"] == "none"


def test_a_final_answer_that_refuses_counts_as_a_refusal():
    messages = _calls(ToolCall(tool_name="final_answer", arguments={"answer": REFUSALS["en"], "citations": []}))
    (answer,) = _run(messages)["answers"]
    assert answer.meta["refused"] is True and answer.data == REFUSALS["en"]


def _quoting_stage():
    """A real answer stage (quote the best sentence, check its citation) taking `query` and `documents`."""
    stage = Pipeline()
    stage.add_component("extractor", ExtractiveAnswerer(REFUSALS, min_score=0.1))
    stage.add_component("answer", CitationVerifier(REFUSALS))
    stage.connect("extractor.replies", "answer.replies")
    return SuperComponent(stage, input_mapping={"query": ["extractor.query", "answer.query"],
                                                "documents": ["extractor.documents", "answer.documents"]},
                          output_mapping={"answer.answers": "answers"})


def test_a_stopped_run_is_answered_from_its_context_by_the_floor_answer():
    messages = _calls(ToolCall(tool_name="kb_search", arguments={"query": "x"}),
                      ToolCall(tool_name="kb_search", arguments={"query": "x"}))
    out = AgentAnswer(REFUSALS, floor_answer=_quoting_stage()).run(
        query="How many unused days carry over?", messages=messages, exit_reason="repeated_call", step_count=2,
        tool_call_counts={"kb_search": 2}, documents=[LEAVE, ROW], token_usage={"prompt_tokens": 300})
    (answer,) = out["answers"]
    check_answer(answer, "answer")
    assert answer.data == "Up to 5 unused days may be carried over into the next year. [1]"
    assert answer.meta["refused"] is False and answer.meta["citations"][0]["doc_id"] == "en/leave_policy.md"
    assert answer.meta["agent"] == {"steps": 2, "tools": ["kb_search", "kb_search"], "tool_calls": {"kb_search": 2},
                                    "stop_reason": "repeated_call", "answered_by": "floor"}
    assert "prompt_tokens" not in answer.meta.get("usage", {})  # the agent's steps are traced, not re-counted here
    assert [d.id for d in out["documents"]] == ["c1", "sql:leave_allowance/21"]


def test_a_final_answer_is_the_model_s_even_with_a_floor_answer():
    messages = _calls(ToolCall(tool_name="final_answer", arguments={"answer": "Five days.", "citations": []}))
    out = AgentAnswer(REFUSALS, floor_answer=_quoting_stage()).run(
        query="How many days carry over?", messages=messages, exit_reason="final_answer", step_count=1,
        tool_call_counts={"final_answer": 1}, documents=[LEAVE])
    (answer,) = out["answers"]
    assert answer.data == "Five days." and answer.meta["agent"]["answered_by"] == "model"


def test_to_dict():
    assert AgentAnswer(REFUSALS, ["cannot"], 0.4).to_dict() == {
        "type": "components.agents.agent_answer.AgentAnswer",
        "init_parameters": {"refusals": REFUSALS, "refusal_patterns": ["cannot"], "support_threshold": 0.4,
                            "floor_answer": None},
    }


def test_to_dict_with_a_floor_answer_and_back(monkeypatch):
    stage = _quoting_stage()
    assert AgentAnswer(REFUSALS, floor_answer=stage).to_dict() == {
        "type": "components.agents.agent_answer.AgentAnswer",
        "init_parameters": {"refusals": REFUSALS, "refusal_patterns": [], "support_threshold": 0.5,
                            "floor_answer": stage.to_dict()},
    }
    monkeypatch.setenv("HAYSTACK_DESERIALIZATION_ALLOWLIST", "components")  # Haystack loads only trusted modules
    back = AgentAnswer.from_dict(AgentAnswer(REFUSALS, floor_answer=stage).to_dict())
    assert back.floor_answer.to_dict() == stage.to_dict()
