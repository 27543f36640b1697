"""Kept for models promoted before serving/ existed: their pyfunc code (`promoted_model.py`, copied into the model)
imports `ServedPipeline` from here and answers through it. It is the scoped pyfunc answerer, so those models
apply the same principal scoping as new ones. Remove once no such model is served."""

from serving.pyfunc_answerer import PyfuncAnswerer as ServedPipeline

__all__ = ["ServedPipeline"]
