"""The MLflow pyfunc model of a promoted run, logged as models-from-code by `experiments.promote`.

Input: one request (a dict) or several (a list of dicts, or a DataFrame whose rows are requests), each with a
`question` and optionally `history` ([{role, content}]) and `filters` (a Haystack filter). Output: one reply per
request, as `ServedPipeline.ask` gives it.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import mlflow
import pandas as pd

from experiments.promoted import ServedPipeline

# Requests are dicts of varying shape, so predict has no type hints for MLflow to infer a schema from.
warnings.filterwarnings("ignore", message=".*Add type hints to the `predict` method")
REQUEST_FIELDS = ("question", "history", "filters")


class RagtuneModel(mlflow.pyfunc.PythonModel):
    def load_context(self, context: mlflow.pyfunc.PythonModelContext) -> None:
        self.served = ServedPipeline.load(Path(context.artifacts["bundle"]))

    def predict(self, context, model_input, params=None):  # noqa: ANN001, ANN201 (hints would make MLflow infer a schema)
        return [self.served.ask(**request) for request in requests(model_input)]


def requests(model_input: Any) -> list[dict[str, Any]]:
    """The requests in whatever shape pyfunc hands them over: a dict, a list of dicts, or a DataFrame."""
    if isinstance(model_input, pd.DataFrame):
        rows = model_input.to_dict(orient="records")
    elif isinstance(model_input, dict):
        rows = [model_input]
    else:
        rows = list(model_input)
    rows = [{key: _plain(value) for key, value in row.items()} for row in rows]
    unknown = sorted({key for row in rows for key in row} - set(REQUEST_FIELDS))
    if unknown or any(not isinstance(row.get("question"), str) or not row["question"].strip() for row in rows):
        raise ValueError(f"each request needs a non-empty 'question' and may hold {list(REQUEST_FIELDS)}; got {unknown or rows}")
    return [{key: row[key] for key in REQUEST_FIELDS if _given(row.get(key))} for row in rows]


def _plain(value: Any) -> Any:
    """`mlflow models serve` hands JSON `inputs` over as numpy arrays, 0-d for a string."""
    return value.tolist() if hasattr(value, "tolist") else value


def _given(value: Any) -> bool:
    """A DataFrame fills a missing field with NaN or None."""
    return value is not None and not (isinstance(value, float) and value != value)


mlflow.models.set_model(RagtuneModel())
