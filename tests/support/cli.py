"""The `ragtune` command as the tests run it: in process, or as an unprivileged user so that file permissions hold."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from serving import cli
from tests.support.paths import ROOT


def ragtune(*argv: str) -> int:
    """`ragtune ARGV`'s exit code: what the CLI returns, or what argparse exits with (as the console script does)."""
    try:
        return cli.main(list(argv))
    except SystemExit as e:
        return int(e.code)


def last_line(text: str) -> str:
    """The command's own line on stderr (argparse prints its usage first)."""
    return text.strip().splitlines()[-1] if text.strip() else ""


def as_nobody(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    """`ragtune ARGV` from this checkout as an unprivileged user, so that file permissions hold (root ignores them)."""
    drop = [] if os.geteuid() else ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    if drop and shutil.which("setpriv") is None:
        pytest.skip("running as root and setpriv (to drop privileges) is missing")
    return subprocess.run(
        [*drop, sys.executable, "-m", "serving.cli", *argv], cwd=ROOT, capture_output=True, text=True, check=False,
        env=os.environ | {"PYTHONPATH": str(ROOT), "HOME": str(cwd), "PYTHONDONTWRITEBYTECODE": "1"},
    )
