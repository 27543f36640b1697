"""Imported by the fork server that serve.py's workers are forked from (`serve.workers` above 1), after the
worker's own module (which imports serve.py's): what a worker would otherwise import only once it serves, so
that its pages too are shared, then a freeze of the garbage collector's view of it all, whose collections would
otherwise write to every object's header, so copy every page of it, in each worker. Measured on the demo, the
imports below cut a worker's own memory from 249 to 203 MB of its 827 MB RSS. jieba's dictionary (some 60 MB of
Python objects) is loaded here too: each worker would otherwise load its own copy at its first Chinese text."""

import gc

import git  # noqa: F401 (MLflow's git context of a trace)
import jieba
import jinja2  # noqa: F401 (chat templates)
import llama_cpp  # noqa: F401 (the offline answerers' models)
import mlflow.store.tracking.rest_store  # noqa: F401 (the traces' store: a tracking server)
import mlflow.store.tracking.sqlalchemy_store  # noqa: F401 (or a database, with its migrations)
import mlflow.tracing.fluent  # noqa: F401 (each request's trace)
import mlflow.types.responses  # noqa: F401
import uvicorn.lifespan.on  # noqa: F401 (what uvicorn imports as it starts serving)
import uvicorn.protocols.http.h11_impl  # noqa: F401
import uvicorn.protocols.websockets.auto  # noqa: F401

jieba.initialize()
gc.freeze()
