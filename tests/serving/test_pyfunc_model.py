"""The pyfunc model's requests and its answerer's scoping: control flow with a recording pipeline here, and the
real thing on a model promoted before serving/ existed (tests/fixtures), loaded as `mlflow.pyfunc` loads it."""

import shutil
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
import pytest
from mlflow.exceptions import MlflowException

from pipelines.access import IndexAccess
from pipelines.errors import ConfigError
from serving.principals import Principal, scoped_filters
from serving.pyfunc_answerer import PyfuncAnswerer, requests
from serving.settings import SERVE_ENV, ServeSettings

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
LEGACY_MODEL = FIXTURES / "model_promoted_before_serving_package"
# The legacy model's corpus: a public code of conduct, acme's travel policy, beta's incident page for `security`.
LEGACY_KEYS = "k-acme: {tenant: acme, groups: []}\nk-beta-sec: {tenant: beta, groups: [security]}\n"


def status(error: pytest.ExceptionInfo) -> int:
    return error.value.get_http_status_code()


def test_requests_come_as_a_dict_a_list_or_dataframe_rows():
    one = {"question": "How many leave days?", "history": [{"role": "user", "content": "hi"}]}
    assert requests(one) == [one]
    assert requests([one, {"question": "Hotel limit?"}]) == [one, {"question": "Hotel limit?"}]
    narrow = {"field": "meta.x", "operator": "==", "value": 1}
    frame = pd.DataFrame([{"question": "Hotel limit?"}, {"question": "Leave?", "filters": narrow, "credentials": "k"}])
    assert requests(frame) == [{"question": "Hotel limit?"}, {"question": "Leave?", "filters": narrow, "credentials": "k"}]


@pytest.mark.parametrize("bad", [{"question": " "}, {"question": "ok", "tenant": "b"}, {"history": []},
                                 {"question": "ok", "filters": {"field": "meta.x", "operator": "==", "value": [1]}},
                                 {"question": "\ud800"}])
def test_a_malformed_request_is_a_400_naming_what_it_needs(bad):
    with pytest.raises(MlflowException, match="each request needs a non-empty 'question'") as error:
        requests(bad)
    assert status(error) == 400


def test_numpy_values_from_the_mlflow_scoring_server_become_plain_values():
    assert requests([{"question": np.array("Hotel limit?")}]) == [{"question": "Hotel limit?"}]


class RecordingPipeline:
    """Stands in for ServedPipeline in the control-flow tests (test_a_promoted_model_* below run the real one)."""

    def __init__(self, takes_filters=True):
        self.filters, self.takes_filters = [], takes_filters

    def ask(self, question, history=None, filters=None, stages=False):
        self.filters.append(filters)
        return {"answer": question}


def answerer(anonymous="refuse", keys=True, takes_filters=True) -> tuple[PyfuncAnswerer, RecordingPipeline]:
    pipeline = RecordingPipeline(takes_filters)
    lookup = {"k-acme": Principal("acme", ("hr",))}.get if keys else None
    return PyfuncAnswerer(pipeline, ServeSettings(anonymous=anonymous), lookup), pipeline


def test_credentials_become_the_principal_that_scopes_the_request():
    ask, pipeline = answerer()
    narrow = {"field": "meta.lang", "operator": "==", "value": "en"}
    assert ask.ask("q", filters=narrow, credentials="k-acme") == {"answer": "q"}
    assert pipeline.filters == [scoped_filters(Principal("acme", ("hr",)), narrow)]


@pytest.mark.parametrize("credentials", [None, "", "k-nope"])
def test_without_valid_credentials_the_request_is_a_401_and_nothing_runs(credentials):
    ask, pipeline = answerer()
    with pytest.raises(MlflowException, match="unauthenticated") as error:
        ask.ask("q", credentials=credentials)
    assert status(error) == 401 and pipeline.filters == []


def test_anonymous_public_answers_from_public_documents_only_and_bad_credentials_stay_a_401():
    ask, pipeline = answerer(anonymous="public")
    ask.ask("q")
    assert pipeline.filters == [scoped_filters(None, None)]
    with pytest.raises(MlflowException) as error:
        ask.ask("q", credentials="k-nope")
    assert status(error) == 401


def test_without_configured_credentials_every_request_is_scoped_to_public_documents():
    ask, pipeline = answerer(keys=False)
    ask.ask("q")
    assert pipeline.filters == [scoped_filters(None, None)]
    with pytest.raises(MlflowException) as error:  # a credential nobody can check is not taken on trust
        ask.ask("q", credentials="k-acme")
    assert status(error) == 401


def test_a_pipeline_without_a_filters_input_runs_unfiltered_where_every_document_is_public():
    """`load` lets such a pipeline serve only an index with no tenant or acl: the scope is then every document."""
    ask, pipeline = answerer(keys=False, takes_filters=False)
    ask.ask("q")
    narrow = {"field": "meta.lang", "operator": "==", "value": "en"}
    ask.ask("q", filters=narrow)  # handed on as asked: ServedPipeline refuses them (400), it cannot apply them
    assert pipeline.filters == [None, narrow]


@pytest.mark.parametrize(("request_", "code"), [
    ({"question": "q" * 3000}, 400),  # MLflow has no 413 error code: a limit is a 400 naming it
    ({"question": "q", "history": [{"role": "user", "content": "x"}] * 21}, 400),
])
def test_limits_apply_as_on_serve_py(request_, code):
    ask, pipeline = answerer()
    with pytest.raises(MlflowException, match="the limit is") as error:
        ask.ask(**request_, credentials="k-acme")
    assert status(error) == code and pipeline.filters == []


@pytest.fixture
def legacy_model(tmp_path, monkeypatch):
    """The fixture model, copied (loading must write nothing into it, checked by the tests)."""
    model = tmp_path / "model"
    shutil.copytree(LEGACY_MODEL, model)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RAGTUNE_CACHE", str(tmp_path / "cache"))
    (tmp_path / "keys.yaml").write_text(LEGACY_KEYS)
    return model


def tree(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(f.relative_to(folder)): (f.stat().st_size, f.stat().st_mtime_ns) for f in folder.rglob("*")}


def test_a_model_promoted_before_serving_existed_refuses_to_load_unscoped(legacy_model, monkeypatch):
    monkeypatch.delenv(SERVE_ENV, raising=False)
    with pytest.raises(ConfigError, match="tenant-split: 2 of 3 documents scoped by acl, tenant across 2 tenants, "
                                          "and no credentials are configured"):
        mlflow.pyfunc.load_model(str(legacy_model))


def test_a_model_promoted_before_serving_existed_serves_each_principal_only_its_documents(legacy_model, monkeypatch):
    monkeypatch.setenv(SERVE_ENV, f"serve.api_keys_file={legacy_model.parent / 'keys.yaml'}")
    before = tree(legacy_model)
    model = mlflow.pyfunc.load_model(str(legacy_model))
    question = "Beta incident response: how often does the security team rotate the root keys?"
    with pytest.raises(MlflowException, match="unauthenticated") as error:
        model.predict({"question": question})
    assert status(error) == 401
    seen = {}
    for key in ("k-acme", "k-beta-sec"):
        reply = model.predict({"question": question, "credentials": key})[0]
        seen[key] = {d["doc_id"] for d in reply["documents"]}
    assert seen == {"k-acme": {"conduct.txt", "acme/travel.txt"}, "k-beta-sec": {"conduct.txt", "beta/incident.txt"}}
    assert tree(legacy_model) == before  # no last_used, no rebuilt index: the registered files stay as they were


def test_the_legacy_models_access_is_read_from_its_snapshot(legacy_model):
    from serving.bundle import snapshot_access

    access = snapshot_access(next((legacy_model / "artifacts" / "bundle" / "index").iterdir()))
    assert access == IndexAccess.of([("conduct.txt", {}), ("acme/travel.txt", {"tenant": "acme"}),
                                     ("beta/incident.txt", {"tenant": "beta", "acl": ["security"]})])
