"""Index snapshots as ragtune writes them, and a process id that is surely dead (a killed build's)."""

import subprocess
import sys

from haystack import Document

CHUNKS = [
    Document(id=f"a#{i}-{i + 1}", content="a", meta={"doc_id": "a", "span": [i, i + 1]}, embedding=[0.1, 0.2])
    for i in range(3)
]


def dead_pid() -> int:
    """The pid of a process that has exited, as a killed build's temp folder names it."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid
