import json

import pytest
from haystack import Document, Pipeline, component
from haystack.core.serialization import component_to_dict
from haystack.dataclasses import ChatMessage
from haystack.document_stores.in_memory import InMemoryDocumentStore

from components.query.sequential_decomposer import SequentialDecomposer
from components.retrievers.bm25_retriever import BM25sRetriever
from tests.support.scripted_chat_generator import ScriptedChatGenerator

# Control flow on scripted replies over a real BM25 index; SmolLM2 under the shipped schema runs in
# tests/components/answer/test_local_llms.py.
TEMPLATES = {"en": "Q: {question}\nKnown:\n{facts}\nPassages:\n{passages}", "zh": "问：{question}\n已知：\n{facts}\n段落：\n{passages}"}
QUESTION = "Who signs off a contract worth $30,000?"


@component
class Replies:
    """Replies in turn, recording each prompt."""

    def __init__(self, *replies: str) -> None:
        self.replies = list(replies)
        self.prompts: list[str] = []

    @component.output_types(replies=list[ChatMessage])
    def run(self, messages: list[ChatMessage]) -> dict[str, list[ChatMessage]]:
        self.prompts.append(messages[0].text)
        return {"replies": [ChatMessage.from_assistant(self.replies.pop(0))]}


def reply(answer: str, after: str) -> str:
    return json.dumps({"answer": answer, "next": after})


@pytest.fixture(scope="module")
def retriever() -> BM25sRetriever:
    store = InMemoryDocumentStore()
    store.write_documents([
        Document(id="band", content="Contracts from $25,000 to $100,000 are in the CFO band.", meta={"tenant": "a"}),
        Document(id="cfo", content="The CFO band is signed by the Chief Financial Officer.", meta={"tenant": "a"}),
        Document(id="other", content="Contracts from $25,000 are signed by the CEO.", meta={"tenant": "b"}),
    ])
    return BM25sRetriever(store, top_k=1)


def test_each_look_up_is_formed_after_reading_what_the_last_one_found(retriever):
    generator = Replies(reply("", "Which approval band is a $30,000 contract in?"),
                        reply("the CFO band", "Who signs contracts in the CFO band?"),
                        reply("the Chief Financial Officer", ""))
    out = SequentialDecomposer(generator, retriever, TEMPLATES).run(query=QUESTION)
    assert out == {"queries": ["Which approval band is a $30,000 contract in?", "Who signs contracts in the CFO band?",
                               QUESTION],
                   "facts": ["Which approval band is a $30,000 contract in? the CFO band",
                             "Who signs contracts in the CFO band? the Chief Financial Officer"],
                   "fallback": False}
    assert generator.prompts[0].endswith("Known:\n-\nPassages:\n-")  # nothing known or read yet
    assert "CFO band." in generator.prompts[1] and "- Which approval band" in generator.prompts[2]


def test_planning_stops_at_max_hops_and_on_unrelated_or_repeated_look_ups(retriever):
    endless = [reply("x", f"contract step {i}") for i in range(5)]
    out = SequentialDecomposer(Replies(*endless), retriever, TEMPLATES, max_hops=2).run(query=QUESTION)
    assert out["queries"] == ["contract step 0", "contract step 1", QUESTION]
    for stray in ("yes", "...", QUESTION):
        out = SequentialDecomposer(Replies(reply("", stray)), retriever, TEMPLATES).run(query=QUESTION)
        assert out == {"queries": [QUESTION], "facts": [], "fallback": True}, stray


@pytest.mark.parametrize("bad", ["not json", '["a list"]', '{"answer": "x", "next": "contract', ""])
def test_an_unusable_reply_ends_the_planning_with_what_was_found(retriever, bad):
    out = SequentialDecomposer(Replies(reply("", "contract band"), bad), retriever, TEMPLATES).run(query=QUESTION)
    assert out["queries"] == ["contract band", QUESTION] and out["fallback"] is False
    alone = SequentialDecomposer(ScriptedChatGenerator(bad), retriever, TEMPLATES).run(query=QUESTION)
    assert alone == {"queries": [QUESTION], "facts": [], "fallback": True}


def test_the_look_ups_respect_the_pipelines_filters_and_the_questions_language(retriever):
    generator = Replies(reply("", "Who signs contracts from $25,000?"), reply("", ""))
    SequentialDecomposer(generator, retriever, TEMPLATES).run(
        query=QUESTION, filters={"field": "meta.tenant", "operator": "==", "value": "b"})
    assert "CEO" in generator.prompts[1] and "CFO" not in generator.prompts[1]
    chinese = Replies(reply("", ""))
    SequentialDecomposer(chinese, retriever, TEMPLATES).run(query="三万元的合同谁签？")
    assert chinese.prompts[0].startswith("问：")


def test_to_dict_and_round_trip(retriever):
    planner = SequentialDecomposer(ScriptedChatGenerator("{}"), retriever, TEMPLATES, max_hops=2)
    data = planner.to_dict()
    assert data == {
        "type": "components.query.sequential_decomposer.SequentialDecomposer",
        "init_parameters": {"chat_generator": component_to_dict(ScriptedChatGenerator("{}"), "chat_generator"),
                            "retriever": retriever.to_dict(), "templates": TEMPLATES, "max_hops": 2},
    }
    pipeline = Pipeline()
    pipeline.add_component("planner", planner)
    restored = Pipeline.loads(pipeline.dumps(), allowed_modules=["components", "tests"]).get_component("planner")
    assert restored.to_dict() == data


@pytest.mark.parametrize(("kwargs", "message"), [({"templates": {"en": "{question}"}}, "must contain"),
                                                 ({"max_hops": 0}, "max_hops must be >= 1")])
def test_bad_settings_are_refused(retriever, kwargs, message):
    with pytest.raises(ValueError, match=message):
        SequentialDecomposer(ScriptedChatGenerator("{}"), retriever, **({"templates": TEMPLATES} | kwargs))
