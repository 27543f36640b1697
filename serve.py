"""Serve a promoted run: `python serve.py model=models:/NAME@production serve.api_keys_file=keys.yaml`, the same as
`ragtune serve ...` (serving/serve_command.py). Exit codes as every ragtune command's (serving/cli.py): 0 stopped,
2 a mistake in config or environment (one line on stderr), 1 a bug, 130/143 interrupted.
"""

import sys

from experiments.runs.process import set_env_defaults

set_env_defaults(MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR="false")

from serving.cli import run_command  # noqa: E402

if __name__ == "__main__":
    sys.exit(run_command("serve", sys.argv[1:]))
