"""Control flow of judge-failure counting; tests/test_run.py runs a real RAGAS judge (SmolLM2, which fails)."""

import math

from experiments.evaluation.judge import Judge


async def good(user_input, response, retrieved_contexts):
    return 0.75


async def broken(user_input, response, retrieved_contexts):
    raise ValueError("schema validation failed")


async def nan(user_input, response, retrieved_contexts):
    return math.nan


def test_failures_are_counted_with_reasons_and_never_scored():
    judge = Judge({"answer/faithfulness": good, "answer/response_relevancy": broken, "answer/x": nan}, "judge@x")
    judgement = judge.judge("q", "a", ["c"])
    assert judgement.scores == {"answer/faithfulness": 0.75}
    assert judgement.errors == {
        "answer/response_relevancy": "ValueError: schema validation failed",
        "answer/x": "the judge returned NaN",
    }
