import os

import pytest

# Tests run offline and must not phone home.
for key, value in {
    "HAYSTACK_TELEMETRY_ENABLED": "False",
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "HF_HUB_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
}.items():
    os.environ.setdefault(key, value)


@pytest.fixture
def mlflow_store(tmp_path):
    """A real MLflow sqlite store in the test's folder, made current: (its URI, a client, the `demo` experiment id)."""
    from tests.support.mlflow_runs import tracking

    return tracking(tmp_path)
