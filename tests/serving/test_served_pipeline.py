"""A served pipeline on the real local models."""

import pytest

from experiments.runs.indexed import prepare_pipeline
from serving.served_pipeline import ServedPipeline
from tests.support.shipped import composed


@pytest.mark.slow
def test_a_served_llm_answer_streams_the_real_generators_tokens(tmp_path):
    """SmolLM2 through llama.cpp: the tokens handed on as they come make up the answer the reply then gives."""
    served = ServedPipeline.warm(prepare_pipeline(composed("pipeline=naive", "answer=llm", f"paths.cache={tmp_path}")))
    question, tokens = "How many days of paid annual leave do full-time employees accrue?", []
    reply = served.ask(question, on_token=tokens.append)
    assert len(tokens) > 1 and "".join(tokens).strip() == reply["answer"]
    assert served.ask(question)["answer"] == reply["answer"]  # streaming changes nothing in the reply
