"""The MLflow pyfunc model of a promoted run, logged as models-from-code by `experiments.promote`.

Input: one request (a dict) or several (a list of dicts, or a DataFrame whose rows are requests), each with a
`question` and optionally `history` ([{role, content}]) and `filters` (a Haystack filter). Output: one reply per
request, as `ServedPipeline.ask` gives it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mlflow
import pandas as pd
from pydantic import ValidationError

from experiments.promoted import ServedPipeline
from experiments.request_schema import QueryRequest

# `stream` is serve.py's: predict returns whole replies.
REQUEST_FIELDS = tuple(name for name in QueryRequest.model_fields if name != "stream")



class RagtuneModel(mlflow.pyfunc.PythonModel):
    def load_context(self, context: mlflow.pyfunc.PythonModelContext) -> None:
        self.served = ServedPipeline.load(Path(context.artifacts["bundle"]))

    # No type hints: requests are dicts of varying shape. MLflow says so in a UserWarning it forces through its own
    # warning filter ("Add type hints to the `predict` method"), so that line shows when the model is logged or loaded.
    def predict(self, context, model_input, params=None):  # noqa: ANN001, ANN201
        return [self.served.ask(**request) for request in requests(model_input)]


def requests(model_input: Any) -> list[dict[str, Any]]:
    """The requests in whatever shape pyfunc hands them over: a dict, a list of dicts, or a DataFrame."""
    if isinstance(model_input, pd.DataFrame):
        rows = model_input.to_dict(orient="records")
    elif isinstance(model_input, dict):
        rows = [model_input]
    else:
        rows = list(model_input)
    needs = f"each request needs a non-empty 'question' and may hold {list(REQUEST_FIELDS)}"
    try:
        parsed = [QueryRequest.model_validate({k: _plain(v) for k, v in row.items() if _given(v)}) for row in rows]
    except ValidationError as e:
        raise ValueError(f"{needs}: {e}") from None
    if any(not request.question.strip() for request in parsed):
        raise ValueError(f"{needs}; got an empty question")
    if any(request.stream for request in parsed):
        raise ValueError("stream: the pyfunc model returns whole replies; serve.py's /query streams them")
    return [request.model_dump(exclude_unset=True, exclude={"stream"}) for request in parsed]


def _plain(value: Any) -> Any:
    """`mlflow models serve` hands JSON `inputs` over as numpy arrays, 0-d for a string."""
    return value.tolist() if hasattr(value, "tolist") else value


def _given(value: Any) -> bool:
    """A DataFrame fills a missing field with NaN or None."""
    return value is not None and not (isinstance(value, float) and value != value)


mlflow.models.set_model(RagtuneModel())
