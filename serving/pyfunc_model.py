"""The MLflow pyfunc model of a promoted run, logged as models-from-code by `serving.promote`.

Input: one request (a dict) or several (a list of dicts, or a DataFrame whose rows are requests), each with a
`question` and optionally `history` ([{role, content}]), `filters` (a Haystack filter, which can only narrow) and
`credentials` (an API key or signed token: serving/pyfunc_answerer.py says when one is needed). Output: one reply
per request, as `ServedPipeline.ask` gives it. Logged as code, so this file holds only the model's shell.
"""

from __future__ import annotations

from pathlib import Path

import mlflow

from serving.pyfunc_answerer import PyfuncAnswerer


class RagtuneModel(mlflow.pyfunc.PythonModel):
    def load_context(self, context: mlflow.pyfunc.PythonModelContext) -> None:
        self.answerer = PyfuncAnswerer.load(Path(context.artifacts["bundle"]))

    # No type hints: requests are dicts of varying shape. MLflow says so in a UserWarning it forces through its own
    # warning filter ("Add type hints to the `predict` method"), so that line shows when the model is logged or loaded.
    def predict(self, context, model_input, params=None):  # noqa: ANN001, ANN201
        return self.answerer.predict(model_input)


mlflow.models.set_model(RagtuneModel())
