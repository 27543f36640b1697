"""Leave-one-set-out choice of the hybrid fusion settings: is a setting chosen on the other sets safe on a new one?

    python -m benchmarks.fusion_loso                    # demo-en, demo-zh, HaluEval-200 (if its index is cached),
                                                        # and every set under .cache/ragtune/doc_sets/
    python -m benchmarks.fusion_loso --sets demo-en python_faq-en debian_faq-zh --json loso.json
    python -m benchmarks.fusion_loso --halueval yes     # build HaluEval's embedded index if needed (minutes)
    python -m benchmarks.fusion_loso --overrides models=e5_small   # the same folds over multilingual-e5 indexes

Per set, the project's own hybrid pipeline (`pipeline=hybrid`, built by pipelines/builder.py over the index
pipelines/index/build.py builds or loads) runs ONCE per golden question; the BM25 and dense candidate lists it hands to
its fusion component (`retriever.candidates` each) are kept, cached under `<paths.cache>/fusion_loso/`. Every grid
point is then an in-memory re-fusion of those lists by the real `RankFusionJoiner`, scored with the project's
relevance judge (experiments/evaluation/relevance.py) and rank metrics (experiments/evaluation/metrics.py) at the configured top_k.
BM25-only and dense-only are the first top_k entries of each path's list (what `pipeline=bm25` / `pipeline=dense`
retrieve). As a check, the grid point equal to the configured defaults must reproduce the pipeline's own fused
ranking for every question; a mismatch is printed.

For each fold (one set held out), a grid point is chosen on the other sets by two rules:
- mean: the best mean MRR@10 over the other sets;
- worst: the best worst case, over the other sets, of MRR@10 relative to that set's best single path
  (BM25 or dense, whichever is higher there).
The held-out set then shows the chosen point's MRR@10 against BM25, dense and the best single path, and whether it
loses by more than 2 % (relative) to the best single path. Nothing under conf/ is changed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import pickle
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from haystack import Document
from omegaconf import OmegaConf
from tqdm import tqdm

from benchmarks.common import ROOT
from components.common.paths import cache_root
from components.joiners.rank_fusion_joiner import RankFusionJoiner
from experiments.datasets.golden.items import GoldenItem
from experiments.evaluation.metrics import rank_metrics
from experiments.evaluation.relevance import judge
from experiments.runs.config import compose, validate
from experiments.runs.indexed import prepare_pipeline
from pipelines.fusion_fit import KINDS, choose_weight, pseudo_query_lists

K = 10
LOSS_THRESHOLD = 0.02  # a held-out MRR@10 more than 2 % (relative) below the best single path is a loss
BUILTIN_SETS: dict[str, list[str]] = {
    "demo-en": ["dataset=demo", "dataset.subset=en"],
    "demo-zh": ["dataset=demo", "dataset.subset=zh"],
    "halueval": ["dataset=halueval"],  # 200 sampled questions (conf/dataset/halueval.yaml)
}
CACHE_FORMAT = 2


# --- the grid -------------------------------------------------------------------------------------------------


def grid() -> dict[str, dict[str, Any]]:
    """Label -> RankFusionJoiner parameters that differ from the configured ones (see conf/retriever/default.yaml).

    The BM25 weight stays 1 and the dense weight varies: only their ratio matters for rrf and dbsf.
    """
    points: dict[str, dict[str, Any]] = {}
    for bonus in (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8):
        for dense in (0.5, 0.75, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0):
            points[f"dbsf b={bonus:g} wd={dense:g}"] = {
                "mode": "dbsf",
                "agreement_bonus": bonus,
                "weights": {"bm25": 1.0, "dense": dense},
            }
    for rrf_k in (10, 30, 60, 100):
        for dense in (0.5, 1.0, 2.0):
            points[f"rrf k={rrf_k} wd={dense:g}"] = {
                "mode": "rrf",
                "rrf_k": rrf_k,
                "weights": {"bm25": 1.0, "dense": dense},
            }
    for floor in (0.2, 0.3, 0.4):  # cosine floor: a weak dense list adds nothing
        points[f"dbsf b=0.2 wd=1 dense>={floor:g}"] = {
            "mode": "dbsf",
            "agreement_bonus": 0.2,
            "weights": {"bm25": 1.0, "dense": 1.0},
            "min_scores": {"bm25": 0.0, "dense": floor},
        }
    for signal in ("gap", "entropy"):  # query-adaptive: each path weighted by how clearly its top hit stands out
        for strength in (0.5, 1.0, 2.0):
            for label, base in (("dbsf b=0.2", {"mode": "dbsf", "agreement_bonus": 0.2}), ("rrf k=60", {"mode": "rrf", "rrf_k": 60})):
                points[f"{label} wd=1 {signal}^{strength:g}"] = {
                    **base,
                    "weights": {"bm25": 1.0, "dense": 1.0},
                    "confidence": signal,
                    "confidence_strength": strength,
                }
    for unfit in (0.5, 1.0):  # the dense path on queries in a language the embedder does not list
        points[f"dbsf b=0.2 wd=1 unfit={unfit:g}"] = {
            "mode": "dbsf",
            "agreement_bonus": 0.2,
            "weights": {"bm25": 1.0, "dense": 1.0},
            "unfit_weight": unfit,
        }
        points[f"rrf k=60 wd=1 unfit={unfit:g}"] = {
            "mode": "rrf",
            "rrf_k": 60,
            "weights": {"bm25": 1.0, "dense": 1.0},
            "unfit_weight": unfit,
        }
    points["merge wd=1"] = {"mode": "merge", "weights": {"bm25": 1.0, "dense": 1.0}}
    return points


# --- retrieval, once per set ----------------------------------------------------------------------------------


@dataclass
class SetRun:
    """One set's judgeable questions, each with the candidate list of every fusion path and the pipeline's output."""

    name: str
    language: str
    items: list[GoldenItem]
    lists: list[dict[str, list[Document]]]
    fused: list[list[Document]]
    fusion_params: dict[str, Any]
    top_k: int
    min_overlap: float
    info: dict[str, Any] = field(default_factory=dict)
    # Per pseudo-query kind (pipelines/fusion_fit.py): the pseudo-queries and each path's list for them.
    pseudo: dict[str, tuple[list[tuple[str, str]], list[dict[str, list[Document]]]]] = field(default_factory=dict)


def doc_set_overrides(cache: Path) -> dict[str, list[str]]:
    """Every set built by experiments/datasets/doc_sets/ under `<cache>/doc_sets/<name>/`."""
    sets = {}
    for source_file in sorted((cache / "doc_sets").glob("*/SOURCE.json")):
        source = json.loads(source_file.read_text(encoding="utf-8"))
        folder = source_file.parent
        sets[source["name"]] = [
            "dataset=local",
            f"dataset.name={source['name']}",
            f"dataset.language={source['spec']['language']}",
            f"dataset.corpus_dir={folder / 'corpus'}",
            f"dataset.golden={folder / 'golden.jsonl'}",
        ]
    return sets


def _fusion_inputs(query: Any) -> tuple[str, dict[str, tuple[str, str]]]:
    """The fusion component's name and, per path socket, the (component, output socket) feeding it."""
    fusions = [name for name, instance in query.pipeline.walk() if isinstance(instance, RankFusionJoiner)]
    if len(fusions) != 1:
        raise SystemExit(f"pipeline {query.name}: expected one RankFusionJoiner, found {fusions}")
    fusion = fusions[0]
    senders = {
        data["to_socket"].name: (sender, data["from_socket"].name)
        for sender, receiver, data in query.pipeline.graph.edges(data=True)
        if receiver == fusion
    }
    return fusion, senders


def retrieve(
    name: str, overrides: Sequence[str], cache: Path, halueval: str, use_cache: bool
) -> SetRun | None:
    """Runs the hybrid pipeline over the set's judgeable questions (or loads the cached result); None = skipped."""
    cfg = compose(["pipeline=hybrid", *overrides, f"paths.cache={cache}"])
    prepared = prepare_pipeline(validate(cfg), input_names=None)  # the runner's own dataset, store, index plan and graph
    dataset, fingerprint, index_dir = prepared.dataset, prepared.fingerprint, prepared.index_dir
    if name == "halueval" and halueval == "auto" and not (index_dir / "manifest.json").exists():
        print(
            f"skip halueval: its embedded index {index_dir} is not cached and embedding "
            f"{len(dataset.documents)} passages takes well over 10 minutes on 2 cores (--halueval yes builds it)"
        )
        return None
    settings = {
        "pipeline": OmegaConf.to_container(cfg.pipeline, resolve=True),
        "retriever": OmegaConf.to_container(cfg.retriever, resolve=True),
        "min_overlap": cfg.eval.min_overlap,
    }
    digest = hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()[:12]
    cached = (
        cache
        / "fusion_loso"
        / f"{name}-{fingerprint}-{dataset.fingerprint[:12]}-{digest}-v{CACHE_FORMAT}.pkl"
    )
    if use_cache and cached.exists():
        with cached.open("rb") as handle:
            run = _Unpickler(handle).load()
        print(f"{name}: {len(run.items)} questions, candidate lists from {cached}")
        return run

    query = prepared.query
    start = time.perf_counter()
    index = prepared.index()
    query.warm_up()
    fusion, senders = _fusion_inputs(query)
    fusion_params = query.pipeline.get_component(fusion).to_dict()["init_parameters"]
    # The question input is `question` in the newer pipeline contract, `query` before it.
    question_input = "question" if "question" in query.inputs else "query"
    items, lists, fused = [], [], []
    for item in tqdm(dataset.golden, desc=f"retrieve {name}", unit="q"):
        if judge([], item, cfg.eval.min_overlap) is None:  # unanswerable: not judged for retrieval
            continue
        outputs = query.run(**{question_input: item.question})
        items.append(item)
        lists.append(
            {
                path: [_light(doc) for doc in outputs.get(sender, {}).get(socket) or []]
                for path, (sender, socket) in senders.items()
            }
        )
        fused.append([_light(doc) for doc in query.documents_at(outputs, query.retrieval_output)])
    chunks = prepared.store.filter_documents()
    pseudo = {}
    for kind in KINDS:
        queries, found = pseudo_query_lists(query.pipeline, fusion, chunks, kind)
        pseudo[kind] = (queries, [{path: [_light(d) for d in docs] for path, docs in lists_.items()} for lists_ in found])
    run = SetRun(
        name=name,
        language=str(dataset.language),  # a plain str: the config's Language enum does not pickle
        items=items,
        lists=lists,
        fused=fused,
        fusion_params=fusion_params,
        top_k=int(cfg.retriever.top_k),
        min_overlap=float(cfg.eval.min_overlap),
        pseudo=pseudo,
        info={
            "documents": len(dataset.documents),
            "chunks": index.chunks,
            "index": fingerprint,
            "index_cache_hit": index.cache_hit,
            "seconds": round(time.perf_counter() - start, 1),
        },
    )
    cached.parent.mkdir(parents=True, exist_ok=True)
    with cached.open("wb") as handle:
        pickle.dump(run, handle)
    print(
        f"{name}: {len(items)} questions retrieved in {run.info['seconds']} s (index cache hit: {index.cache_hit})"
    )
    return run


class _Unpickler(pickle.Unpickler):
    """Reads lists cached by this file run as a script, whose SetRun was `__main__.SetRun`."""

    def find_class(self, module: str, name: str) -> Any:
        return SetRun if name == "SetRun" else super().find_class(module, name)


def _light(doc: Document) -> Document:
    """The document without its vector: fusion and judging read only id, score, content and meta."""
    return replace(doc, embedding=None) if doc.embedding is not None else doc


# --- scoring --------------------------------------------------------------------------------------------------


def score(run: SetRun, rankings: Sequence[Sequence[Document]]) -> dict[str, float]:
    """Mean MRR@10 and recall@10 over the set's questions, by the project's judge and rank metrics."""
    totals = {"mrr": 0.0, "recall": 0.0}
    for item, ranking in zip(run.items, rankings, strict=True):
        metrics = rank_metrics(judge(list(ranking), item, run.min_overlap), [K])
        totals["mrr"] += metrics[f"mrr_at_{K}"]
        totals["recall"] += metrics[f"recall_at_{K}"]
    return {key: value / len(run.items) for key, value in totals.items()}


def fuse(run: SetRun, params: dict[str, Any]) -> list[list[Document]]:
    joiner = RankFusionJoiner(**params)
    return [
        joiner.run(query=item.question, **lists)["documents"]
        for item, lists in zip(run.items, run.lists, strict=True)
    ]


def evaluate_set(run: SetRun, points: dict[str, dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Scores of BM25-only, dense-only, the configured default and every grid point on one set."""
    results = {
        path: score(run, [lists.get(path, [])[: run.top_k] for lists in run.lists])
        for path in ("bm25", "dense")
    }
    default = fuse(run, run.fusion_params)
    mismatches = sum(
        [d.id for d in mine] != [d.id for d in theirs]
        for mine, theirs in zip(default, run.fused, strict=True)
    )
    if mismatches:
        print(
            f"WARNING {run.name}: in-memory default fusion differs from the pipeline's on {mismatches} questions"
        )
    results["default"] = score(run, default)
    for label, changes in tqdm(points.items(), desc=f"grid {run.name}", unit="pt", leave=False):
        results[label] = score(run, fuse(run, {**run.fusion_params, **changes}))
    for kind, (queries, found) in run.pseudo.items():
        fit = choose_weight(RankFusionJoiner(**run.fusion_params), found, queries, kind)
        weights = {**(run.fusion_params.get("weights") or {}), "dense": fit.dense_weight}
        results[f"fit:{kind}"] = score(run, fuse(run, {**run.fusion_params, "weights": weights})) | {
            "dense_weight": fit.dense_weight, **{f"pseudo_mrr_{p}": m for p, m in fit.path_mrr.items()}}
    return results


# --- leave one set out ----------------------------------------------------------------------------------------


def best_single(results: dict[str, dict[str, float]]) -> tuple[str, float]:
    path = max(("bm25", "dense"), key=lambda p: results[p]["mrr"])
    return path, results[path]["mrr"]


def relative(value: float, reference: float) -> float:
    return value / reference - 1 if reference > 0 else 0.0


def choose(train: dict[str, dict[str, dict[str, float]]], labels: Sequence[str], rule: str) -> str:
    """The grid label the rule prefers on the training sets (ties: first in grid order)."""

    def mean(label: str) -> float:
        return sum(results[label]["mrr"] for results in train.values()) / len(train)

    def worst(label: str) -> float:
        return min(relative(results[label]["mrr"], best_single(results)[1]) for results in train.values())

    key = mean if rule == "mean" else worst
    return max(labels, key=lambda label: (key(label), -labels.index(label)))


def folds(
    all_results: dict[str, dict[str, dict[str, float]]], labels: list[str], rule: str
) -> list[dict[str, Any]]:
    rows = []
    for held in all_results:
        train = {name: results for name, results in all_results.items() if name != held}
        label = choose(train, labels, rule)
        results = all_results[held]
        path, single = best_single(results)
        mrr = results[label]["mrr"]
        rows.append(
            {
                "held_out": held,
                "rule": rule,
                "chosen": label,
                "mrr": mrr,
                "recall": results[label]["recall"],
                "bm25": results["bm25"]["mrr"],
                "dense": results["dense"]["mrr"],
                "best_single": single,
                "best_single_path": path,
                "relative": relative(mrr, single),
                "loses": relative(mrr, single) < -LOSS_THRESHOLD,
                "default": results["default"]["mrr"],
                "default_relative": relative(results["default"]["mrr"], single),
            }
        )
    return rows


# --- printing -------------------------------------------------------------------------------------------------


def print_sets(
    runs: dict[str, SetRun], all_results: dict[str, dict[str, dict[str, float]]], labels: list[str]
) -> None:
    print(
        f"\nPer set: MRR@{K} (recall@{K}); `default` = the configured fusion; `oracle` = the best grid point on that set"
    )
    header = "| set | lang | questions | BM25 | dense | default hybrid | default vs best single | oracle grid point |"
    print(header)
    print("|---|---|---|---|---|---|---|---|")
    for name, results in all_results.items():
        _, single = best_single(results)
        oracle = max(labels, key=lambda label: results[label]["mrr"])
        print(
            f"| {name} | {runs[name].language} | {len(runs[name].items)} "
            f"| {results['bm25']['mrr']:.3f} ({results['bm25']['recall']:.3f}) "
            f"| {results['dense']['mrr']:.3f} ({results['dense']['recall']:.3f}) "
            f"| {results['default']['mrr']:.3f} ({results['default']['recall']:.3f}) "
            f"| {relative(results['default']['mrr'], single):+.1%} "
            f"| {results[oracle]['mrr']:.3f} `{oracle}` |"
        )


def print_folds(rows: list[dict[str, Any]], rule: str) -> None:
    titles = {
        "mean": "best mean MRR@10 over the other sets",
        "worst": "best worst-case MRR@10 relative to the best single path over the other sets",
    }
    print(f"\nLeave-one-set-out, rule `{rule}`: {titles[rule]}")
    print(
        f"| held-out set | chosen on the others | held-out MRR@{K} | BM25 | dense | best single "
        f"| vs best single | loses > {LOSS_THRESHOLD:.0%} | default (vs best single) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(
            f"| {row['held_out']} | `{row['chosen']}` | {row['mrr']:.3f} | {row['bm25']:.3f} | {row['dense']:.3f} "
            f"| {row['best_single']:.3f} ({row['best_single_path']}) | {row['relative']:+.1%} "
            f"| {'**yes**' if row['loses'] else 'no'} | {row['default']:.3f} ({row['default_relative']:+.1%}) |"
        )
    losses = sum(row["loses"] for row in rows)
    mean_rel = sum(row["relative"] for row in rows) / len(rows)
    default_losses = sum(row["default_relative"] < -LOSS_THRESHOLD for row in rows)
    print(
        f"rule `{rule}`: {losses} of {len(rows)} folds lose > {LOSS_THRESHOLD:.0%} to the best single path "
        f"(mean held-out change {mean_rel:+.1%}); the current default loses on {default_losses}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--sets", nargs="+", help="set names (default: demo-en demo-zh halueval + every doc set)"
    )
    parser.add_argument(
        "--halueval",
        choices=("auto", "yes", "no"),
        default="auto",
        help="auto: only when its embedded index is already cached",
    )
    parser.add_argument(
        "--cache", type=Path, default=ROOT / cache_root()
    )
    parser.add_argument(
        "--no-cache", action="store_true", help="re-run retrieval even when its lists are cached"
    )
    parser.add_argument("--json", type=Path, help="write every score and fold to this file")
    parser.add_argument("--overrides", nargs="*", default=[], help="run.py overrides for every set, e.g. models=e5_small")
    args = parser.parse_args(argv)
    logging.getLogger("haystack").setLevel(logging.WARNING)

    cache = args.cache.resolve()
    known = BUILTIN_SETS | doc_set_overrides(cache)
    names = args.sets or [n for n in known if n != "halueval" or args.halueval != "no"]
    unknown = [n for n in names if n not in known]
    if unknown:
        parser.error(
            f"unknown set(s) {unknown}; known: {sorted(known)} (build doc sets with experiments.datasets.doc_sets)"
        )
    runs = {}
    for name in names:
        run = retrieve(name, [*known[name], *args.overrides], cache, args.halueval, not args.no_cache)
        if run is not None:
            runs[name] = run
    if len(runs) < 2:
        raise SystemExit("need at least two sets for leave-one-set-out")

    points = grid()
    labels = list(points)
    start = time.perf_counter()
    all_results = {name: evaluate_set(run, points) for name, run in runs.items()}
    print(
        f"\n{len(points)} grid points x {len(runs)} sets re-fused and scored in {time.perf_counter() - start:.0f} s"
    )
    print_sets(runs, all_results, labels)
    fold_rows = {rule: folds(all_results, labels, rule) for rule in ("mean", "worst")}
    for rule, rows in fold_rows.items():
        print_folds(rows, rule)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(
            json.dumps(
                {
                    "sets": {name: {"questions": len(run.items), **run.info} for name, run in runs.items()},
                    "grid": points,
                    "results": all_results,
                    "folds": fold_rows,
                },
                indent=2,
            )
        )
        print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    from benchmarks import fusion_loso  # the cached lists then pickle this module's SetRun, not __main__'s

    sys.exit(fusion_loso.main())
