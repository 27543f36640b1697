"""Router accuracy on the demo's labelled routes: each router alone and the cascade, per language.

    python -m benchmarks.routers                       # rules, knn, llm, cascade (offline models)
    python -m benchmarks.routers --routers rules knn   # a subset
    python -m benchmarks.routers --overrides models=minilm

The questions are data/demo/golden.jsonl and golden_routes.jsonl (every item carries `route`); the knn router's
examples (data/router/examples.jsonl) share none of them. Prints accuracy per language, which router decided
in the cascade, milliseconds per question, and the cascade's confusion matrix (rows: labelled, columns: routed).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from collections.abc import Sequence

from benchmarks.common import ROOT
from components.common.text import detect_language
from components.routers.routes import ROUTES
from experiments.datasets.golden.items import GoldenItem
from experiments.datasets.golden.parsing import parse_golden
from experiments.runs.config import compose
from pipelines.instantiate import instantiate_component

GOLDEN = [ROOT / "data/demo/golden.jsonl", ROOT / "data/demo/golden_routes.jsonl"]


def labelled() -> list[GoldenItem]:
    items = [i for path in GOLDEN for i in parse_golden(path.read_text(encoding="utf-8").splitlines(), str(path))]
    return [item for item in items if item.route]


def evaluate(name: str, overrides: Sequence[str], items: Sequence[GoldenItem]) -> list[str]:
    cfg = compose([f"router={name}", *overrides])
    router = instantiate_component(cfg.router.component, "router.component", {})
    router.warm_up() if hasattr(router, "warm_up") else None
    routed, deciders, start = [], Counter(), time.perf_counter()
    for item in items:
        decision = router.classify(item.question)
        routed.append(decision.route)
        deciders[decision.by] += 1
    ms = (time.perf_counter() - start) * 1000 / len(items)
    right = [r == i.route for r, i in zip(routed, items, strict=True)]
    by_language = {
        lang: [ok for ok, i in zip(right, items, strict=True) if detect_language(i.question) == lang] for lang in ("en", "zh")
    }
    cells = " | ".join(f"{sum(v) / len(v):.3f} ({sum(v)}/{len(v)})" for v in by_language.values())
    decided = ", ".join(f"{k} {v}" for k, v in deciders.most_common())
    print(f"| {name} | {sum(right) / len(right):.3f} | {cells} | {ms:.1f} | {decided} |", flush=True)
    return routed


def confusion(items: Sequence[GoldenItem], routed: Sequence[str]) -> None:
    counts = Counter((i.route, r) for i, r in zip(items, routed, strict=True))
    print("\n| labelled \\ routed | " + " | ".join(ROUTES) + " |")
    print("|---" * (len(ROUTES) + 1) + "|")
    for label in ROUTES:
        print(f"| {label} | " + " | ".join(str(counts[(label, r)]) for r in ROUTES) + " |")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--routers", nargs="*", default=["rules", "knn", "llm", "cascade"])
    parser.add_argument("--overrides", nargs="*", default=[], help="run.py overrides, e.g. models=minilm")
    args = parser.parse_args(argv)
    items = labelled()
    print(f"{len(items)} labelled questions: " + ", ".join(f"{r} {n}" for r, n in Counter(i.route for i in items).items()))
    print("\n| router | accuracy | en | zh | ms/question | decided by |\n|---|---|---|---|---|---|")
    routed = {name: evaluate(name, args.overrides, items) for name in args.routers}
    last = args.routers[-1]
    print(f"\nconfusion of {last}:")
    confusion(items, routed[last])
    return 0


if __name__ == "__main__":
    sys.exit(main())
