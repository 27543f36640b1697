"""Whether a process still runs, by its pid: what a killed process left behind (a snapshot build's temp folder, an
MLflow run left RUNNING, a serve.py worker's ready mark or metrics) is told from what a live one keeps."""

from __future__ import annotations

import os


def alive(pid: int) -> bool:
    """True while `pid` runs, another user's process included (signal 0 checks without sending anything)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True
