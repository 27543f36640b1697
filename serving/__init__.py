"""Serving a promoted run: the HTTP API (serve.py), the MLflow pyfunc model, promotion and its bundle, principals
and the request schema, and the tenant leak audit. Every path that returns documents scopes them to the principal
through serving/principals.py. Imports experiments, pipelines and components; nothing below imports it."""
