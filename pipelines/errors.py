"""The one base class of mistakes a user can fix (config, data, models, environment).

`run.py` prints these as one line and exits 2; anything else is a bug and keeps its traceback. Either way the
MLflow run ends FAILED with `error.txt`.
"""

from __future__ import annotations


class UserError(Exception):
    """A mistake in config, data or environment; the message names the key, file or line at fault."""


class ConfigError(UserError, ValueError):
    """A config value that cannot work; the message names the key."""


def require(ok: bool, key: str, message: str) -> None:
    """A config record's own check: the error names the full config key."""
    if not ok:
        raise ConfigError(f"config key '{key}': {message}")
