"""The floor search (pipelines/agent_floor.py): a hook that serialises, a first step the model still owns, and over
the demo with the shipped models, an agent whose retrieval and context start with exactly `advanced`'s, and whose
floor answer, when its model stops before its first step, is `advanced`'s answer."""

import pytest
from haystack.dataclasses import ChatMessage, ToolCall
from haystack.tools import Tool

from components.agents.agent_answer import FLOOR_SEARCH
from components.agents.wrapped_chat_generator import is_first_step
from experiments.evaluation.evaluate import pipeline_inputs
from experiments.runs.config import validate
from experiments.runs.indexed import load_indexed_pipeline
from pipelines.agent_floor import FloorSearchHook
from tests.support.shipped import composed

QUERY = {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}


def test_to_dict_and_back():
    tool = Tool(name="kb_search", description="Search.", parameters=QUERY, function=str)
    hook = FloorSearchHook(tool)
    assert hook.to_dict() == {
        "type": "pipelines.agent_floor.FloorSearchHook",
        "init_parameters": {"tool": tool.to_dict()},
    }
    assert FloorSearchHook.from_dict(hook.to_dict()).tool.to_dict() == tool.to_dict()


def test_a_tool_without_a_query_cannot_be_the_floor():
    lookup = Tool(
        name="lookup",
        description="Look up.",
        function=str,
        parameters={"type": "object", "properties": {"term": {"type": "string"}}},
    )
    with pytest.raises(ValueError, match="tool 'lookup' takes no `query`"):
        FloorSearchHook(lookup)


def test_the_model_s_first_step_comes_after_the_floor_search():
    """first_tool holds the model's first own step: the floor's call, made for it, does not count."""
    floor = ToolCall(tool_name="kb_search", arguments={"query": "q"}, id=FLOOR_SEARCH)
    conversation = [
        ChatMessage.from_user("q"),
        ChatMessage.from_assistant(tool_calls=[floor], meta={FLOOR_SEARCH: True}),
        ChatMessage.from_tool("[a.md] passage", origin=floor),
    ]
    assert is_first_step(conversation)
    own = ChatMessage.from_assistant(tool_calls=[ToolCall(tool_name="kb_search", arguments={"query": "x"})])
    assert not is_first_step([*conversation, own])


def _ids(documents):
    return [d.id for d in documents]


@pytest.mark.slow
def test_on_the_demo_the_agent_retrieves_first_what_advanced_retrieves(tmp_path):
    """The shipped models and demo index: for an English and a Chinese question, the agent's retrieval starts with
    `advanced`'s whole ranking and its context with `advanced`'s passages, whatever SmolLM2 then does."""
    common = ("dataset=demo", f"paths.cache={tmp_path}")
    advanced = load_indexed_pipeline(validate(composed("pipeline=advanced", *common)))
    agent = load_indexed_pipeline(
        validate(composed("pipeline=agentic", "pipeline.components.agent.max_agent_steps=2", *common))
    )
    golden = [item for item in advanced.dataset.golden if item.answerable]
    english = next(item for item in golden if item.question.isascii())
    chinese = next(item for item in golden if not item.question.isascii())
    for item in (english, chinese):
        alone = advanced.query.view_documents(advanced.query.run(**pipeline_inputs(advanced.query, item)))
        floored = agent.query.view_documents(agent.query.run(**pipeline_inputs(agent.query, item)))
        assert len(alone["retrieval"]) >= 10 and len(alone["context"]) == 3, item.id
        assert _ids(floored["retrieval"])[: len(alone["retrieval"])] == _ids(alone["retrieval"]), item.id
        assert _ids(floored["context"])[:3] == _ids(alone["context"]), item.id


@pytest.mark.slow
def test_on_the_demo_a_model_that_stops_first_answers_exactly_what_advanced_answers(tmp_path):
    """The shipped models and demo index, the model stopped before its first step (its deadline already passed):
    the floor answer is `advanced`'s answer stage on the floor's passages, so the reply is `advanced`'s, word for
    word and citation for citation, in English and in Chinese."""
    common = ("dataset=demo", f"paths.cache={tmp_path}")
    advanced = load_indexed_pipeline(validate(composed("pipeline=advanced", *common)))
    stopped = load_indexed_pipeline(
        validate(composed("pipeline=agentic", "pipeline.components.agent.timeout_s=1e-9", *common))
    )
    golden = [item for item in advanced.dataset.golden if item.answerable]
    english = [item for item in golden if item.question.isascii()][:2]
    chinese = [item for item in golden if not item.question.isascii()][:2]
    answered = 0
    for item in (*english, *chinese):
        alone = advanced.query.answer(advanced.query.run(**pipeline_inputs(advanced.query, item)))
        floor = stopped.query.answer(stopped.query.run(**pipeline_inputs(stopped.query, item)))
        assert floor.meta["agent"]["stop_reason"] == "timeout" and floor.meta["agent"]["answered_by"] == "floor"
        assert (floor.data, floor.meta["citations"]) == (alone.data, alone.meta["citations"]), item.id
        answered += not floor.meta["refused"]
    assert answered >= 2  # the floor answers, not only refuses alike
