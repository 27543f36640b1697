"""llama.cpp's log read with the level numbers of the ggml it ships with, so a warning is not shown as an error.

llama-cpp-python 0.3.36 maps ggml's levels with an older enum (INFO 1, WARN 2, ERROR 3), while its bundled ggml
numbers them DEBUG 1, INFO 2, WARN 3, ERROR 4. Every warning then passes its `verbose=False` filter as an error:
"llama_kv_cache_iswa: using full-size SWA cache" on each Gemma 3 load. This callback reads the current numbers and
keeps llama-cpp-python's rule: errors always, everything else only when a model was loaded with `verbose=True`.
"""

from __future__ import annotations

import ctypes
import logging
import sys

GGML_LEVELS = {0: logging.CRITICAL, 1: logging.DEBUG, 2: logging.INFO, 3: logging.WARNING, 4: logging.ERROR}
GGML_CONT = 5  # continues the previous message, at its level
_state = {"last": logging.CRITICAL, "callback": None}


def python_level(ggml_level: int, previous: int) -> int:
    return previous if ggml_level == GGML_CONT else GGML_LEVELS.get(ggml_level, logging.ERROR)


def shown(level: int) -> bool:
    """llama-cpp-python sets its logger to DEBUG for verbose=True and to ERROR otherwise."""
    return logging.getLogger("llama-cpp-python").level <= level


def install() -> None:
    """Replaces llama-cpp-python's callback (set when `llama_cpp.llama` is imported); idempotent."""
    if _state["callback"] is not None:
        return
    import llama_cpp
    import llama_cpp.llama  # noqa: F401 (imports llama-cpp-python's callback first, so this one replaces it)

    @llama_cpp.llama_log_callback
    def callback(level: int, text: bytes, _user_data: ctypes.c_void_p) -> None:
        _state["last"] = python_level(level, _state["last"])
        if shown(_state["last"]):
            print(text.decode("utf-8", errors="replace"), end="", flush=True, file=sys.stderr)

    _state["callback"] = callback  # ctypes calls it for as long as the process lives: keep it referenced
    llama_cpp.llama_log_set(callback, ctypes.c_void_p(0))
