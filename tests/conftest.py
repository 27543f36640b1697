import pytest

from experiments.runs.process import set_env_defaults

# Tests run offline and must not phone home: the entry points' settings, and no model hub.
set_env_defaults(HF_HUB_OFFLINE="1")


@pytest.fixture
def mlflow_store(tmp_path):
    """A real MLflow sqlite store in the test's folder, made current: (its URI, a client, the `demo` experiment id)."""
    from tests.support.mlflow_runs import tracking

    return tracking(tmp_path)
