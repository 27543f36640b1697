"""The pyfunc model's answerer (`mlflow models serve`, `mlflow.pyfunc.load_model`): serve.py's scoping rule for a
caller that sends no headers.

A request carries its principal in the body, as `credentials`: an API key of `serve.api_keys_file` or a token
signed by the issuer (`serve.auth=jwt`), the settings coming from `$RAGTUNE_SERVE` (e.g.
`RAGTUNE_SERVE="serve.api_keys_file=keys.yaml"`), since MLflow's scoring server passes the model no arguments.
Once credentials are configured every request needs valid ones, unless `serve.anonymous=public`, which answers a
request without them from public documents only. With none configured, a model whose index has no `tenant` or
`acl` field answers anyone (every document is public), and a tenant-split one refuses to load.

Every request is an MLflow trace (serve.trace.*, as serve.py records them) when `$RAGTUNE_SERVE` names the
served model (`model=models:/NAME@ALIAS`): the scoring server does not tell the model its name, and the traces go
to that model's experiment. The pyfunc has no /feedback: MLflow's scoring server serves our predict only.

Refusals are MlflowExceptions whose error code the scoring server turns into the HTTP status (401, 400, 413), with
a message that depends on the request alone.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from mlflow.exceptions import MlflowException
from mlflow.protos.databricks_pb2 import (
    INTERNAL_ERROR,
    INVALID_PARAMETER_VALUE,
    UNAUTHENTICATED,
)
from pydantic import ValidationError

from pipelines.errors import ConfigError
from serving.http.answering import request_fault
from serving.online.traces import Traces, model_version, served_model, traced
from serving.online.variants import Variant
from serving.principals import Principal, credential_lookup, scoped_filters
from serving.request_schema import PyfuncRequest, RequestRefused, check_request
from serving.served_pipeline import ServedPipeline
from serving.settings import SERVE_ENV, ServeSettings, env_config, serve_settings

logger = logging.getLogger("ragtune.serve")
# `stream` is serve.py's: predict returns whole replies.
REQUEST_FIELDS = tuple(name for name in PyfuncRequest.model_fields if name != "stream")
ERROR_CODES = {400: INVALID_PARAMETER_VALUE, 401: UNAUTHENTICATED, 413: INVALID_PARAMETER_VALUE}


def refusal(status: int, reason: str) -> MlflowException:
    return MlflowException(reason, error_code=ERROR_CODES.get(status, INVALID_PARAMETER_VALUE))


@dataclass
class PyfuncAnswerer:
    served: ServedPipeline
    settings: ServeSettings
    lookup: Callable[[str], Principal | None] | None  # None: no credentials configured
    traces: Traces | None = None
    # What its traces call the served model: models:/NAME@ALIAS's alias and its registered version.
    variant: Variant = field(default_factory=lambda: Variant("champion", ""))

    @classmethod
    def load(cls, bundle: Path) -> PyfuncAnswerer:
        cfg = env_config()
        settings = serve_settings(cfg)
        lookup = credential_lookup(settings, required=False)  # a bad key or keys file fails before the pipeline loads
        served = ServedPipeline.load(bundle)
        access = served.access
        if access.scoped and lookup is None and settings.anonymous != "public":
            raise ConfigError(
                f"this model's index is {access.summary()}, and no credentials are configured: set "
                f"{SERVE_ENV}='serve.api_keys_file=KEYS.yaml' (or serve.auth=jwt serve.jwt.key_file=PUBLIC_KEY.pem) "
                f"so requests can send theirs, or serve.anonymous=public to answer from public documents only"
            )
        if access.scoped and not served.takes_filters:
            raise ConfigError(f"pipeline {served.indexed.query.name} has no 'filters' input, so requests to a "
                              "tenant-split index cannot be kept to their principal")
        logger.info("pyfunc model: its index is %s", access.summary())
        if not settings.trace.enabled or cfg.model is None:
            return cls(served, settings, lookup)
        uri = str(cfg.model)
        variant = Variant(served_model(uri)[1], uri, model_version(uri))
        return cls(served, settings, lookup, Traces.for_model(settings.trace, uri, settings.trace_experiment), variant)

    def principal(self, credentials: str | None) -> Principal | None:
        """None: an anonymous request that the settings let through (public documents only, or an index without
        tenants and no credentials configured)."""
        if credentials:
            principal = self.lookup(credentials) if self.lookup is not None else None
            if principal is None:
                raise refusal(401, "unauthenticated: the credentials are not valid")
            return principal
        if self.lookup is not None and self.settings.anonymous != "public":
            raise refusal(401, "unauthenticated: send 'credentials' (an API key or a signed token) with the request")
        return None

    def predict(self, model_input: Any) -> list[dict[str, Any]]:
        """One reply per request of `model_input`, in whatever shape pyfunc hands it over (see `requests`)."""
        return [self.ask(**request) for request in requests(model_input)]

    def ask(
        self,
        question: str,
        history: Sequence[Mapping[str, str]] | None = None,
        filters: Mapping[str, Any] | None = None,
        credentials: str | None = None,
        stages: bool = False,
    ) -> dict[str, Any]:
        principal = self.principal(credentials)
        try:
            check_request(question, [turn["content"] for turn in history or []], filters, self.settings)
        except RequestRefused as e:
            raise refusal(e.status, e.reason) from None
        # A pipeline without a `filters` input loads only over an index with no tenant or acl (checked in `load`),
        # where the scope is every document: it then runs unfiltered, and a client's own filters are refused.
        scope = scoped_filters(principal, filters) if self.served.takes_filters else filters
        request_id = uuid.uuid4().hex
        record = self.traces.start(question, principal, request_id, self.variant) if self.traces else None
        status, reply = 200, {}
        try:
            reply = self.served.ask(question, history, scope, stages=stages, **traced(record))
        except Exception as e:
            fault = request_fault(e)
            status = 400 if fault is not None else 500
            if fault is not None:
                raise refusal(400, fault) from None
            logger.exception("trace %s failed", request_id)
            raise MlflowException(f"internal error (trace_id {request_id})", error_code=INTERNAL_ERROR) from None
        finally:
            if record is not None:
                record.finish(status, reply)
        return reply | {"trace_id": record.trace_id} if record is not None else reply


def requests(model_input: Any) -> list[dict[str, Any]]:
    """The requests in whatever shape pyfunc hands them over: a dict, a list of dicts, or a DataFrame. All of them
    are checked before any is answered."""
    if isinstance(model_input, pd.DataFrame):
        rows = model_input.to_dict(orient="records")
    elif isinstance(model_input, dict):
        rows = [model_input]
    else:
        rows = list(model_input)
    needs = f"each request needs a non-empty 'question' and may hold {list(REQUEST_FIELDS)}"
    try:
        parsed = [PyfuncRequest.model_validate({k: _plain(v) for k, v in row.items() if _given(v)}) for row in rows]
    except (ValidationError, AttributeError) as e:
        raise refusal(400, f"{needs}: {e}") from None
    if any(not request.question.strip() for request in parsed):
        raise refusal(400, f"{needs}; got an empty question")
    if any(request.stream for request in parsed):
        raise refusal(400, "stream: the pyfunc model returns whole replies; serve.py's /query streams them")
    return [request.model_dump(exclude_unset=True, exclude={"stream"}) for request in parsed]


def _plain(value: Any) -> Any:
    """`mlflow models serve` hands JSON `inputs` over as numpy arrays, 0-d for a string."""
    return value.tolist() if hasattr(value, "tolist") else value


def _given(value: Any) -> bool:
    """A DataFrame fills a missing field with NaN or None."""
    return value is not None and not (isinstance(value, float) and value != value)
