"""SpanAnswerer without a model: serialisation (the model itself is exercised in test_local_llms, marked slow)."""

from components.answer.span_answerer import SpanAnswerer

REFUSALS = {"en": "I cannot answer this from the provided documents.", "zh": "根据提供的资料无法回答。"}
TEMPLATE = "Text: {{ sentences | join(' ') }}\nQuestion: {{ query }}\nAnswer:"


def test_to_dict_with_defaults():
    assert SpanAnswerer(model="/models/gemma.gguf", template=TEMPLATE, refusals=REFUSALS).to_dict() == {
        "type": "components.answer.span_answerer.SpanAnswerer",
        "init_parameters": {
            "model": "/models/gemma.gguf",
            "template": TEMPLATE,
            "refusals": REFUSALS,
            "min_score": 0.2,
            "max_sentences": 1,
            "max_span_words": 8,
            "max_text_tokens": 96,
            "rank_penalty": 0.1,
            "n_ctx": 2048,
            "model_kwargs": {},
        },
    }


def test_to_dict_holds_every_init_parameter_and_from_dict_restores_them():
    params = {
        "model": "/models/gemma.gguf",
        "template": TEMPLATE,
        "refusals": REFUSALS,
        "min_score": 0.3,
        "max_sentences": 2,
        "max_span_words": 5,
        "max_text_tokens": 32,
        "rank_penalty": 0.05,
        "n_ctx": 1024,
        "model_kwargs": {"seed": 42, "n_threads": 2},
    }
    data = SpanAnswerer(**params).to_dict()
    assert data == {"type": "components.answer.span_answerer.SpanAnswerer", "init_parameters": params}
    clone = SpanAnswerer.from_dict(data)
    assert {name: getattr(clone, name) for name in params} == params
    assert clone.to_dict() == data
