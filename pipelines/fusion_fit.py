"""Fusion weights fitted to one corpus at index time, from questions the corpus itself gives: no labels needed.

How strong the dense path is against BM25 differs by corpus (on Chinese technical prose with English terms e5 is far
weaker than BM25; on English FAQs it is stronger), so one static dense weight loses somewhere. With
`retriever.fusion.fit=auto`, once the index is filled:

1. FIT_QUERIES chunks are sampled (those with the smallest SHA-256 of their id, so the sample is the same on every
   build of the index), and each gives a pseudo-query: a sentence of it (`sentence`), or its first half (`half`,
   which leaves the rest of the sentence's words to be matched by meaning), with that chunk as the answer.
2. Each path feeding the fusion runs on every pseudo-query: a retriever that takes the query text directly, or
   one that takes an embedding after the text embedder that feeds it.
3. The dense weight of WEIGHTS under which the fused ranking puts the answer highest (MRR@10) is kept; ties keep
   the configured weight, then the smaller one.

The result is written into the index folder (`fusion_fit-<settings digest>.json`), so a sweep pays for it once per
index and a promoted bundle ships it; the runner logs it as params.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from haystack import Document, Pipeline

from components.common.sentences import content_terms, split_sentences
from components.joiners.rank_fusion_joiner import RESERVED_SOCKETS, RankFusionJoiner
from pipelines.haystack_compat import input_sockets

FIT_QUERIES = 64
WEIGHTS = (0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0)
KINDS = ("sentence", "half")
DENSE_PATH = "dense"
MRR_DEPTH = 10
MIN_TERMS = 6  # a sentence with fewer content terms says too little to stand for a question
FIT_FORMAT = 1


class FusionFitError(ValueError):
    """The pipeline's fusion cannot be fitted; the message names the path and why."""


@dataclass(frozen=True)
class FusionFit:
    kind: str
    queries: int
    dense_weight: float
    path_mrr: dict[str, float]  # each path alone on the pseudo-queries
    weight_mrr: dict[str, float]  # the fused ranking under each candidate dense weight

    def params(self) -> dict[str, float | str]:
        """What the runner logs: `fusion/fit/...`."""
        flat: dict[str, float | str] = {"kind": self.kind, "queries": self.queries, "dense_weight": self.dense_weight}
        flat |= {f"mrr_{path}": round(mrr, 4) for path, mrr in self.path_mrr.items()}
        return {f"fusion/fit/{key}": value for key, value in flat.items()}


def pseudo_queries(chunks: Sequence[Document], kind: str, count: int = FIT_QUERIES) -> list[tuple[str, str]]:
    """(query, id of the chunk it came from) for up to `count` chunks, the same ones on every build."""
    if kind not in KINDS:
        raise FusionFitError(f"retriever.fusion.fit_queries: must be one of {list(KINDS)}, got {kind!r}")
    queries = []
    for chunk in sorted(chunks, key=lambda c: hashlib.sha256(c.id.encode()).hexdigest()):
        sentences = [s for s in split_sentences(chunk.content or "") if len(content_terms(s)) >= MIN_TERMS]
        if not sentences:
            continue
        sentence = max(sentences, key=len)
        queries.append((sentence if kind == "sentence" else _first_half(sentence), chunk.id))
        if len(queries) == count:
            break
    return queries


def _first_half(sentence: str) -> str:
    words = sentence.split()
    if len(words) >= MIN_TERMS:  # spaced text: half of its words
        return " ".join(words[: len(words) // 2])
    return sentence[: len(sentence) // 2]  # Chinese: half of its characters


def choose_weight(
    joiner: RankFusionJoiner, lists: Sequence[Mapping[str, list[Document]]], queries: Sequence[tuple[str, str]],
    kind: str,
) -> FusionFit:
    """The dense weight under which `joiner` ranks each pseudo-query's own chunk highest (see the module doc)."""
    configured = (joiner.weights or {}).get(DENSE_PATH, 1.0)
    path_mrr = {path: _mrr([found.get(path, []) for found in lists], queries) for path in joiner.paths}
    weight_mrr = {}
    original = joiner.weights
    try:
        for weight in WEIGHTS:
            joiner.weights = {**(original or {}), DENSE_PATH: weight}
            fused = [joiner.run(query=query, **found)["documents"] for (query, _), found in zip(queries, lists, strict=True)]
            weight_mrr[f"{weight:g}"] = _mrr(fused, queries)
    finally:
        joiner.weights = original
    best = max(weight_mrr.values())
    ties = [float(w) for w, mrr in weight_mrr.items() if mrr == best]
    chosen = configured if configured in ties else min(ties)
    return FusionFit(kind, len(queries), chosen, path_mrr, weight_mrr)


def _mrr(rankings: Sequence[Sequence[Document]], queries: Sequence[tuple[str, str]]) -> float:
    total = 0.0
    for ranking, (_, answer) in zip(rankings, queries, strict=True):
        ids = [doc.id for doc in ranking[:MRR_DEPTH]]
        total += 1 / (ids.index(answer) + 1) if answer in ids else 0.0
    return total / len(queries) if queries else 0.0


def path_runners(pipeline: Pipeline, fusion: str) -> dict[str, Callable[[str], list[Document]]]:
    """For each path feeding `fusion`, a function from query text to what that path returns: its retriever run on
    the text, or on the embedding the text embedder connected to it makes."""
    runners = {}
    graph = pipeline.graph
    for sender, _, data in graph.in_edges(fusion, data=True):
        path = data["to_socket"].name
        if path in RESERVED_SOCKETS:  # the question, and the guarded paths' failures: not a path's ranking
            continue
        retriever = pipeline.get_component(sender)
        inputs = set(input_sockets(retriever))
        if "query" in inputs:
            runners[path] = _text_runner(retriever)
            continue
        embedders = [s for s, _, d in graph.in_edges(sender, data=True) if d["to_socket"].name == "query_embedding"]
        if "query_embedding" not in inputs or len(embedders) != 1:
            raise FusionFitError(f"retriever.fusion.fit: path {path!r} comes from {sender!r}, which is neither a "
                                 "retriever of text nor one fed by a text embedder; fit it by hand (fusion.weights)")
        runners[path] = _embedding_runner(pipeline.get_component(embedders[0]), retriever)
    return runners


def _text_runner(retriever: Any) -> Callable[[str], list[Document]]:
    return lambda text: retriever.run(query=text)["documents"]


def _embedding_runner(embedder: Any, retriever: Any) -> Callable[[str], list[Document]]:
    return lambda text: retriever.run(query_embedding=embedder.run(text=text)["embedding"])["documents"]


def pseudo_query_lists(
    pipeline: Pipeline, fusion: str, chunks: Sequence[Document], kind: str
) -> tuple[list[tuple[str, str]], list[dict[str, list[Document]]]]:
    """The pseudo-queries of `chunks` and what each path feeding `fusion` returns for each."""
    queries = pseudo_queries(chunks, kind)
    runners = path_runners(pipeline, fusion)
    return queries, [{path: run(query) for path, run in runners.items()} for query, _ in queries]


def fit_fusion(
    pipeline: Pipeline, fusion: str, chunks: Sequence[Document], index_dir: Path, kind: str, write: bool = True
) -> FusionFit:
    """Fits the fusion component `fusion`, or reads its fit from `index_dir`, and sets its dense weight. With
    `write` off (a promoted bundle, whose files stay as registered) a fit not found there is made, not saved."""
    joiner: RankFusionJoiner = pipeline.get_component(fusion)
    if DENSE_PATH not in joiner.paths:
        raise FusionFitError(f"retriever.fusion.fit: fusion {fusion!r} has no {DENSE_PATH!r} path to weigh")
    settings = {"format": FIT_FORMAT, "kind": kind, "count": FIT_QUERIES, "weights": WEIGHTS,
                "joiner": joiner.to_dict()["init_parameters"], "chunks": len(chunks)}
    digest = hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()[:12]
    cached = index_dir / f"fusion_fit-{digest}.json"
    if cached.is_file():
        fit = FusionFit(**json.loads(cached.read_text(encoding="utf-8")))
    else:
        queries, lists = pseudo_query_lists(pipeline, fusion, chunks, kind)
        fit = choose_weight(joiner, lists, queries, kind)
        if write:
            cached.write_text(json.dumps(asdict(fit), indent=1), encoding="utf-8")
    joiner.weights = {**(joiner.weights or {}), DENSE_PATH: fit.dense_weight}
    return fit
