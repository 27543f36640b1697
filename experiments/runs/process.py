"""What an entry point (run.py, serve.py, the `ragtune` command) sets up before it imports the libraries.

Telemetry off and tokenizers single-process: read by Haystack, MLflow and tokenizers when they are imported, so this
runs first. A user's own environment wins (`setdefault`).
"""

from __future__ import annotations

import os
import sys
import warnings

ENV_DEFAULTS = {
    "HAYSTACK_TELEMETRY_ENABLED": "False",
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "TOKENIZERS_PARALLELISM": "false",
}


def set_env_defaults(**extra: str) -> None:
    for key, value in {**ENV_DEFAULTS, **extra}.items():
        os.environ.setdefault(key, value)


def quiet_libraries() -> None:
    """Libraries' deprecation and resource warnings (SQLAlchemy under MLflow, pandas, an unclosed /dev/null inside
    llama-cpp-python) stay off the first screen; `python -W ...` or $PYTHONWARNINGS shows them again."""
    if not sys.warnoptions:
        for category in (DeprecationWarning, PendingDeprecationWarning, FutureWarning, ResourceWarning):
            warnings.filterwarnings("ignore", category=category)
