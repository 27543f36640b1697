"""An import path stored in old models, not a command: the `promoted_model.py` of a model promoted before serving/
existed validates requests with `from experiments.request_schema import QueryRequest`
(tests/fixtures/model_promoted_before_serving_package). The name is theirs; the model is the pyfunc request, which
accepts the `credentials` the scoped answerer needs. Remove once no such model is served."""

from serving.request_schema import PyfuncRequest as QueryRequest

__all__ = ["QueryRequest"]
