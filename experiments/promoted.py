"""An import path stored in old models, not a command: a model promoted before serving/ existed carries its own
`promoted_model.py`, which runs `from experiments.promoted import ServedPipeline` when MLflow loads it
(tests/fixtures/model_promoted_before_serving_package). The name is theirs; what answers is the scoped pyfunc
answerer, so those models apply the same principal scoping as new ones. Remove once no such model is served."""

from serving.pyfunc_answerer import PyfuncAnswerer as ServedPipeline

__all__ = ["ServedPipeline"]
