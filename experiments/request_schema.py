"""Kept for models promoted before serving/ existed: their pyfunc code validates requests with this model, which
now accepts the `credentials` the scoped answerer needs. Remove once no such model is served."""

from serving.request_schema import PyfuncRequest as QueryRequest

__all__ = ["QueryRequest"]
