"""LLMHistoryRewriter's control flow with a scripted generator (the real SmolLM2 path: test_local_llms.py)."""

import pytest
from haystack.dataclasses import ChatMessage

from components.query.llm_history_rewriter import LLMHistoryRewriter
from experiments.evaluation.evaluate import evaluate
from experiments.evaluation.settings import EvalSettings
from pipelines.builder import build_pipeline
from pipelines.spec import GOLDEN_INPUTS
from tests.support.handbook import follow_up, store
from tests.support.scripted_chat_generator import ScriptedChatGenerator

TEMPLATES = {"en": "Conversation:\n{history}\nLast question: {question}", "zh": "对话：\n{history}\n最后一个问题：{question}"}
HISTORY = [ChatMessage.from_user("Is there a nightly hotel limit?"), ChatMessage.from_assistant("Yes, by city.")]


class Recording(ScriptedChatGenerator):
    def run(self, messages):
        self.prompts = [*getattr(self, "prompts", []), messages[0].text]
        return super().run(messages)


def test_a_follow_up_is_restated_by_the_model():
    generator = Recording('{"question": "What is the nightly hotel limit in London?"}')
    out = LLMHistoryRewriter(generator, TEMPLATES).run(question="And in London?", history=HISTORY)
    assert out == {"question": "What is the nightly hotel limit in London?",
                   "queries": ["What is the nightly hotel limit in London?"], "fallback": False}
    assert generator.prompts == ["Conversation:\nuser: Is there a nightly hotel limit?\nassistant: Yes, by city.\n"
                                 "Last question: And in London?"]


def test_without_history_the_question_passes_and_no_call_is_made():
    generator = Recording('{"question": "ignored"}')
    out = LLMHistoryRewriter(generator, TEMPLATES).run(question="What is the hotel limit?", history=[])
    assert out == {"question": "What is the hotel limit?", "queries": [], "fallback": False}
    assert not hasattr(generator, "prompts")


def test_the_template_follows_the_questions_language():
    generator = Recording('{"question": "实习生有几天年假？"}')
    LLMHistoryRewriter(generator, TEMPLATES).run(question="那实习生呢？", history=[ChatMessage.from_user("年假有几天？")])
    assert generator.prompts[0].startswith("对话：")


@pytest.mark.parametrize("reply", ["not json", '{"q": "x"}', '{"question": ""}', '["a list"]', '{"question": 3}',
                                   '{"question": "' + "very long " * 100 + '"}'])
def test_an_unusable_reply_falls_back_to_the_question_and_says_so(reply):
    out = LLMHistoryRewriter(ScriptedChatGenerator(reply), TEMPLATES).run(question="And in London?", history=HISTORY)
    assert out == {"question": "And in London?", "queries": [], "fallback": True}


def test_malformed_output_is_counted_as_a_query_fallback_by_evaluation():
    memory, chunks = store()
    rewriter = {"_target_": "components.query.llm_history_rewriter.LLMHistoryRewriter", "templates": TEMPLATES,
                "chat_generator": {"_target_": "tests.support.scripted_chat_generator.ScriptedChatGenerator", "reply": "{oops"}}
    spec = {"name": "llm-rewrite",
            "components": {"rewriter": rewriter,
                           "bm25": {"_target_": "haystack.components.retrievers.in_memory.InMemoryBM25Retriever",
                                    "document_store": "@store", "top_k": 1}},
            "inputs": {"question": ["rewriter.question", "bm25.query"], "history": ["rewriter.history"]},
            "question_from": "rewriter.question", "retrieval_output": "bm25.documents"}
    built = build_pipeline(spec, {"store": memory}, input_names=GOLDEN_INPUTS)
    result = evaluate(built, [follow_up()], EvalSettings(ks=[1]), chunks, progress=False)
    assert result.metrics["query/fallbacks"] == 1.0 and result.metrics["cost/llm_calls_per_question"] == 1.0
    assert result.per_question[0].routing["rewritten_question"] == "And what is the limit in London?"


def test_a_failing_generator_falls_back_instead_of_stopping_the_run():
    class Unreachable(ScriptedChatGenerator):
        def run(self, messages):
            raise ConnectionError("endpoint down")

    out = LLMHistoryRewriter(Unreachable("{}"), TEMPLATES).run(question="And in London?", history=HISTORY)
    assert out == {"question": "And in London?", "queries": [], "fallback": True}


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"templates": {"en": "no fields"}}, "must contain"),
    ({"turns": 0}, "turns must be >= 1"),
])
def test_bad_settings_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        LLMHistoryRewriter(**{"chat_generator": ScriptedChatGenerator("{}"), "templates": TEMPLATES, **kwargs})


def test_serialisation_is_exact_and_round_trips():
    rewriter = LLMHistoryRewriter(ScriptedChatGenerator('{"question": "x"}'), TEMPLATES, turns=3, max_chars_factor=2.0)
    data = rewriter.to_dict()
    assert data == {
        "type": "components.query.llm_history_rewriter.LLMHistoryRewriter",
        "init_parameters": {
            "chat_generator": {"type": "tests.support.scripted_chat_generator.ScriptedChatGenerator",
                               "init_parameters": {"reply": '{"question": "x"}', "prompt_tokens": 11,
                                                   "completion_tokens": 5, "first": []}},
            "templates": TEMPLATES, "turns": 3, "max_chars_factor": 2.0,
        },
    }
    # the round trip through the generator's own type, with a real Haystack generator (its model is never loaded)
    from haystack_integrations.components.generators.llama_cpp import LlamaCppChatGenerator

    real = LLMHistoryRewriter(LlamaCppChatGenerator(model="/models/smollm2.gguf"), TEMPLATES).to_dict()
    assert LLMHistoryRewriter.from_dict(real).to_dict() == real
