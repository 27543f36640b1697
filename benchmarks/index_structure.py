"""Index strategies at equal cost: each `ingest=` strategy against `recursive` at the same context budgets.

    python -m benchmarks.index_structure          # every set and strategy: docs/results/<date>-index-structure.md
    python -m benchmarks.index_structure --sets demo-en demo-zh git_manual-en --strategies recursive sentence_window
    python -m benchmarks.index_structure --budgets 500 1000 2000 --answer-budgets 500 1000 2000 --time-index

A bigger context trivially covers more evidence, so every strategy gets the SAME context budgets. Sets: the demo
(English and Chinese halves), HaluEval-200 when its index is cached for every strategy (`--halueval yes` builds
it), and every doc set built under `<paths.cache>/doc_sets/`. Strategies: STRATEGIES, an `ingest=` option with its
overrides over the default pipeline and models (`hybrid_rag`, e5, the `by_type` answer); those whose option this tree
lacks are left out. Per set and strategy:

- the index, from the shared index cache or built there: its chunks, its snapshot's size on disk, and the time of
  a cold build (measured here when this run built it, else as recorded by an earlier run of this benchmark;
  `--time-index` times a cold build of a cached index in a temporary folder);
- each question retrieved once by the pipeline itself, with `retriever.top_k` and `answer.context_top_k` raised to
  DEPTH (the fusion only cuts its ranking, so the default's top 20 is its prefix);
- per budget, the context the answer stage would hand on at the smallest `answer.context_top_k` whose widened
  hits (the strategy's `expand` slot, run on that many hits) reach the budget, counted as `context/tokens` counts
  (words, jieba words for Chinese), packed best first: the first hit that does not fit is cut to the tokens left
  (an exact span kept) and ends it, so every context holds at most the budget. `ContextWindow(max_chars)` counts
  characters before the expand slot, which widens the hits after it: no equal cost across strategies; the
  product's `ingest.context_tokens` counts these tokens after it, but keeps whole passages, so a context falls
  short of its budget by up to a passage. Widening a generous top k at once and packing that would merge low
  hits' windows into the best hit's place, where the cut falls;
- per budget, `context/recall` (experiments/evaluation/context_metrics.py) and the mean tokens used; at
  `--answer-budgets` (default 1000 only: the span answerer, which `by_type` runs for factoid questions, takes half a
  second a question on 2 idle cores, several seconds on busy ones) the default answer stage, built from the config
  with a pass-through expand slot, answers from the packed context: answer F1 and the diagnosis's first broken layer
  (experiments/evaluation/diagnosis.py), whose `chunking` count is given;
- paired bootstrap CIs (experiments/comparison/significance.py) of each strategy minus `recursive`, question by
  question, at the same budget.

The default, by leave-one-set-out with benchmarks/defaults_loso.py's rule: per held-out set, the candidate with the
best worst case over the other sets of its context recall relative to `recursive`'s, at the `--loso-budget`
(ties: `recursive`), so `recursive` stays unless another strategy beats it on every other set. Context recall,
not answer F1: every set has evidence to cover, not every set has reference answers, and the offline answer reads
only the best one or two sentences of the context. Retrieval and per-question scores are cached under
`<paths.cache>/index_structure/`, so a rerun only computes what changed. The report names the date, the machine
and the command, and is written by this command only.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import hashlib
import json
import math
import pickle
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from haystack import Document
from matplotlib.figure import Figure
from omegaconf import OmegaConf
from tqdm import tqdm

from benchmarks.common import RESULTS, ROOT, command, report_header, write_result
from benchmarks.defaults_loso import machine
from benchmarks.fusion_loso import BUILTIN_SETS, doc_set_overrides, relative
from components.common.paths import cache_root
from components.context.token_budget import token_count
from experiments.comparison.significance import paired
from experiments.datasets.golden.items import GoldenItem
from experiments.evaluation.answer_metrics import F1, answer_scores
from experiments.evaluation.context_metrics import RECALL, TOKENS, context_scores
from experiments.evaluation.diagnosis import CHUNKING, Evidence, first_broken_layer
from experiments.evaluation.evaluate import evidence_doc_ids
from experiments.evaluation.relevance import Judged, judge
from experiments.evaluation.settings import EvalSettings
from experiments.runs.config import compose, validate
from experiments.runs.indexed import IndexedPipeline, prepare_pipeline
from experiments.runs.runner import evidence_chunks
from pipelines.builder import build_pipeline
from pipelines.built import BuiltPipeline

# Name -> overrides: an `ingest=` option and its sizes (the candidates of the leave-one-set-out choice).
STRATEGIES: dict[str, list[str]] = {
    "recursive": ["ingest=recursive"],
    "recursive-300": ["ingest=recursive", "ingest.chunk_size=300"],
    "sentence_window": ["ingest=sentence_window"],
    "sentence_window-w1": ["ingest=sentence_window", "ingest.window=1"],
    "semantic": ["ingest=semantic"],
    "parent_child": ["ingest=parent_child"],
    "hierarchical": ["ingest=hierarchical"],
}
BASELINE = "recursive"
BUDGETS = (500, 1000, 2000)
ANSWER_BUDGETS = (1000,)
LOSO_BUDGET = 1000
# Hits retrieved per question: enough to fill 2,000 tokens with 300-character English chunks.
DEPTH = 60
# The answer stage's expand slot (conf/answer/*.yaml) and the view of the hits it widens.
EXPAND = "expand"
HITS_VIEW = "stage/context_window"
CACHE_FORMAT = 2
PIPELINE = "pipeline=hybrid_rag"


# --- packing ---------------------------------------------------------------------------------------------------


def cut(text: str, tokens: int, count: Callable[[str], int] = token_count) -> str:
    """The longest prefix of `text` that counts at most `tokens` (a binary search over its characters)."""
    low, high = 0, len(text)
    while low < high:
        middle = (low + high + 1) // 2
        if count(text[:middle]) <= tokens:
            low = middle
        else:
            high = middle - 1
    return text[:low]


def truncated(hit: Document, text: str) -> Document:
    """`hit` with its text cut to the prefix `text`: its span shrinks with it when the text was exactly its span's,
    else it has none and the judge places the text in the corpus (experiments/evaluation/relevance.py)."""
    meta = {key: value for key, value in hit.meta.items() if key != "span"}
    span = hit.meta.get("span")
    if isinstance(span, list | tuple) and len(span) == 2 and span[1] - span[0] == len(hit.content or ""):
        meta["span"] = [span[0], span[0] + len(text)]
    return replace(hit, content=text, meta=meta)


def pack(hits: Sequence[Document], budget: int, count: Callable[[str], int] = token_count) -> list[Document]:
    """The hits, best first, while they fit `budget` tokens; the first that does not is cut to the tokens left and
    ends the context (a cut that keeps no token is dropped)."""
    packed: list[Document] = []
    left = budget
    for hit in hits:
        size = count(hit.content or "")
        if size <= left:
            packed.append(hit)
            left -= size
            continue
        text = cut(hit.content or "", left, count)
        if count(text) > 0:
            packed.append(truncated(hit, text))
        break
    return packed


def filled(
    hits: Sequence[Document],
    budget: int,
    expand: Callable[[Sequence[Document]], list[Document]],
    count: Callable[[str], int] = token_count,
) -> list[Document]:
    """The widened top k hits for the smallest k that reaches `budget` tokens (every hit when none does), packed
    into the budget: what the answer stage hands on at `answer.context_top_k=k`, cut to fit. Widening a generous
    top k at once instead would merge low hits' windows into the best hit's place, where a cut falls on them."""

    @functools.cache
    def widened(k: int) -> list[Document]:
        return expand(hits[:k])

    def tokens(k: int) -> int:
        return sum(count(doc.content or "") for doc in widened(k))

    low, high = min(1, len(hits)), len(hits)
    while low < high:
        middle = (low + high) // 2
        if tokens(middle) >= budget:
            high = middle
        else:
            low = middle + 1
    return pack(widened(low), budget, count)


# --- leave one set out -----------------------------------------------------------------------------------------


def choose(
    scores: Mapping[str, Mapping[str, float]], candidates: Sequence[str], baseline: str = BASELINE
) -> str:
    """The candidate with the best worst case, over the sets of `scores` (set -> candidate -> metric), of its metric
    relative to the baseline's; a tie keeps the earlier candidate, the baseline first."""
    ordered = [baseline, *(c for c in candidates if c != baseline)]

    def worst(candidate: str) -> float:
        return min(relative(by_set[candidate], by_set[baseline]) for by_set in scores.values())

    return max(ordered, key=lambda candidate: (worst(candidate), -ordered.index(candidate)))


@dataclass(frozen=True)
class Fold:
    held_out: str
    chosen: str
    value: float  # the chosen candidate's metric on the held-out set
    baseline: float  # the baseline's there

    @property
    def change(self) -> float:
        return relative(self.value, self.baseline)


def loso(
    scores: Mapping[str, Mapping[str, float]], candidates: Sequence[str], baseline: str = BASELINE
) -> list[Fold]:
    """Per held-out set, the candidate `choose` prefers on the other sets, and how it fares on the held-out one."""
    folds = []
    for held in scores:
        chosen = choose({name: s for name, s in scores.items() if name != held}, candidates, baseline)
        folds.append(Fold(held, chosen, scores[held][chosen], scores[held][baseline]))
    return folds


# --- retrieval, once per set and strategy -------------------------------------------------------------------------


@dataclass
class Retrieved:
    """One set under one strategy: per budget and golden question its context (`filled`, no vectors), and per
    question the judgements of its index chunks and of its retrieval that the diagnosis reads."""

    set_name: str
    strategy: str
    language: str
    key: str  # what its cached scores are filed under
    items: list[GoldenItem]
    contexts: dict[int, list[list[Document]]]
    index_judged: list[Judged | None]
    retrieval_judged: list[Judged | None]
    # doc id -> text, for the documents in the contexts (a cut hit without a span is placed in it)
    corpus: dict[str, str]
    index: dict[str, Any]
    seconds: float  # retrieving every question (the index loaded, the models warm)


def strategy_overrides(strategy: str) -> list[str]:
    return [*STRATEGIES[strategy], f"retriever.top_k={DEPTH}", f"answer.context_top_k={DEPTH}"]


def ingest_option(strategy: str) -> str:
    return next(o.split("=", 1)[1] for o in STRATEGIES[strategy] if o.startswith("ingest="))


def available(strategies: Sequence[str]) -> list[str]:
    """The strategies whose `ingest=` option this tree has (conf/ingest/<option>.yaml)."""
    return [s for s in strategies if (ROOT / "conf" / "ingest" / f"{ingest_option(s)}.yaml").exists()]


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:12]


def write_atomically(path: Path, data: bytes) -> None:
    """A cache file is whole or absent: a run killed mid-write leaves no file a rerun would trust."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    partial.write_bytes(data)
    partial.replace(path)


def _plain(node: Any) -> Any:
    return OmegaConf.to_container(node, resolve=True)


def retrieve(
    name: str,
    overrides: Sequence[str],
    strategy: str,
    budgets: Sequence[int],
    cache: Path,
    halueval: str,
    time_index: bool,
) -> Retrieved | None:
    """The set's questions under the strategy (cached); None when HaluEval's index is not cached under `auto`."""
    # The extractive answerer is the cheap one: the stage's ranking up to its expand slot does not depend on it.
    cfg = compose(
        [PIPELINE, *overrides, *strategy_overrides(strategy), "answer=extractive", f"paths.cache={cache}"]
    )
    prepared = prepare_pipeline(validate(cfg), input_names=None)
    if name == "halueval" and halueval == "auto" and not (prepared.index_dir / "manifest.json").exists():
        print(
            f"skip halueval under {strategy}: its index {prepared.index_dir} is not cached (--halueval yes builds it)"
        )
        return None
    ingest = {k: v for k, v in _plain(cfg.ingest).items() if k != "cache_dir"}
    settings = {
        "pipeline": _plain(cfg.pipeline),
        "retriever": _plain(cfg.retriever),
        "ingest": ingest,
        "min_overlap": cfg.eval.min_overlap,
        "depth": DEPTH,
        "budgets": sorted(budgets),
    }
    key = f"{name}-{strategy}-{prepared.fingerprint}-{prepared.dataset.fingerprint[:12]}-{_digest(settings)}"
    cached = cache / "index_structure" / "retrieved" / f"{key}-v{CACHE_FORMAT}.pkl"
    if cached.exists():
        with cached.open("rb") as handle:
            run = Retrieved(**pickle.load(handle))
        print(f"{name} / {strategy}: {len(run.items)} questions from {cached}")
    else:
        index = prepared.index()
        if not index.cache_hit:
            record_cold_build(cache, index.fingerprint, index.seconds, "built by this benchmark")
        size = sum(path.stat().st_size for path in Path(index.path).iterdir() if path.is_file())
        facts = {
            "fingerprint": index.fingerprint,
            "chunks": index.chunks,
            "bytes": size,
            "cached": index.cache_hit,
        }
        run = _retrieve_questions(name, strategy, key, prepared, budgets, float(cfg.eval.min_overlap), facts)
        write_atomically(cached, pickle.dumps(vars(run)))
        print(f"{name} / {strategy}: {len(run.items)} questions retrieved in {run.seconds:.0f} s")
    if time_index and prepared.fingerprint not in cold_builds(cache):
        seconds = cold_build_seconds([PIPELINE, *overrides, *STRATEGIES[strategy]], cache)
        record_cold_build(
            cache, prepared.fingerprint, seconds, "the cached index built again in a temporary folder"
        )
    return run


def _retrieve_questions(
    name: str,
    strategy: str,
    key: str,
    prepared: IndexedPipeline,
    budgets: Sequence[int],
    min_overlap: float,
    index: dict[str, Any],
) -> Retrieved:
    query, dataset = prepared.query, prepared.dataset
    if HITS_VIEW not in query.views or EXPAND not in query.pipeline.graph.nodes:
        raise SystemExit(f"{query.name}: the answer stage has no {HITS_VIEW} or `{EXPAND}` slot")
    prepared.warm_up()
    expander = query.pipeline.get_component(EXPAND)
    corpus = {doc.id: doc.content or "" for doc in dataset.documents}
    chunks = evidence_chunks(prepared.store, dataset.golden)
    start = time.perf_counter()
    contexts: dict[int, list[list[Document]]] = {budget: [] for budget in budgets}
    index_judged, retrieval_judged = [], []
    for item in tqdm(dataset.golden, desc=f"retrieve {name} / {strategy}", unit="q"):
        outputs = query.run(**query.request_inputs(item.question, item.history, item.filters))
        hits = [replace(doc, embedding=None) for doc in query.documents_at(outputs, query.views[HITS_VIEW])]
        widened: dict[int, list[Document]] = {}  # top k -> its widened hits, shared by the budgets

        def widen(top: Sequence[Document], widened: dict[int, list[Document]] = widened) -> list[Document]:
            if len(top) not in widened:
                widened[len(top)] = expander.run(documents=list(top)).get("documents", [])
            return widened[len(top)]

        for budget in budgets:
            contexts[budget].append(filled(hits, budget, widen))
        retrieval = query.documents_at(outputs, query.retrieval_output)
        retrieval_judged.append(judge(retrieval, item, min_overlap, corpus))
        candidates = [chunk for doc_id in sorted(evidence_doc_ids(item)) for chunk in chunks.get(doc_id, ())]
        # As the runner's diagnosis: table rows are not in the index, only quotes can be split across chunks.
        index_judged.append(judge(candidates, replace(item, rows=()), min_overlap) if chunks else None)
    seconds = time.perf_counter() - start
    used = {
        str(doc.meta.get("doc_id")) for by_question in contexts.values() for c in by_question for doc in c
    }
    return Retrieved(
        name,
        strategy,
        str(dataset.language),  # a local set's is an Enum built at run time, which does not pickle
        key,
        list(dataset.golden),
        contexts,
        index_judged,
        retrieval_judged,
        {doc_id: corpus[doc_id] for doc_id in used if doc_id in corpus},
        index,
        seconds,
    )


def cold_builds(cache: Path) -> dict[str, dict[str, Any]]:
    """Index fingerprint -> the seconds of its cold build, when and how they were measured."""
    path = cache / "index_structure" / "cold_builds.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def record_cold_build(cache: Path, fingerprint: str, seconds: float, how: str) -> None:
    builds = cold_builds(cache)
    builds[fingerprint] = {"seconds": seconds, "date": datetime.date.today().isoformat(), "how": how}
    write_atomically(cache / "index_structure" / "cold_builds.json", json.dumps(builds, indent=1).encode())


def cold_build_seconds(overrides: Sequence[str], cache: Path) -> float:
    """Builds the index again into a temporary index cache (deleted after) and returns how long it took."""
    with tempfile.TemporaryDirectory(prefix="index-structure-") as folder:
        cfg = compose([*overrides, f"paths.cache={cache}", f"ingest.cache_dir={folder}"])
        return prepare_pipeline(validate(cfg), input_names=None).index().seconds


# --- scoring at a budget ---------------------------------------------------------------------------------------


def answer_stage_spec(overrides: Sequence[str], strategy: str) -> dict[str, Any]:
    """The default answer stage as a pipeline of its own (inputs `context` and `question`), its expand slot a
    pass-through and its context window wide open, so that it answers from exactly the packed context."""
    cfg = compose([PIPELINE, *overrides, *strategy_overrides(strategy), "ingest.expand=none"])
    return {"name": f"answer={cfg.answer.name}", **_plain(cfg.answer.stage)}


@functools.cache
def built_stage(spec: str) -> BuiltPipeline:
    """The stage of a JSON spec, built and warmed once per process."""
    stage = build_pipeline(json.loads(spec), key="answer", input_names=None)
    stage.warm_up()
    return stage


def score_budget(
    run: Retrieved, budget: int, stage: BuiltPipeline | None, settings: EvalSettings
) -> list[dict[str, Any]]:
    """Per question: context recall (None when unjudged) and tokens of the packed context; with a stage, its answer
    F1 (None without a reference) and first broken layer."""
    rows = []
    questions = zip(run.items, run.contexts[budget], run.index_judged, run.retrieval_judged, strict=True)
    label = f"{'answer' if stage else 'pack'} {run.set_name} / {run.strategy} @ {budget}"
    for item, context, index_judged, retrieval_judged in tqdm(
        questions, desc=label, total=len(run.items), unit="q"
    ):
        answer = None
        if stage is not None:
            outputs = stage.run(context=context, question=item.question)
            context, answer = stage.documents_at(outputs, stage.context_output), stage.answer(outputs)
        judged = judge(context, item, settings.min_overlap, run.corpus)
        scores = context_scores(context, item, judged, settings.redundancy_threshold)
        row: dict[str, Any] = {
            "id": item.id,
            "recall": scores.get(RECALL),
            "tokens": scores[TOKENS],
        }
        if stage is not None:
            answered = answer_scores(answer, item.reference_answer, bool(item.answerable))
            evidence = Evidence(index=index_judged, retrieval=retrieval_judged, context=judged)
            row |= {
                "f1": answered.get(F1),
                "layer": first_broken_layer(bool(item.answerable), evidence, answered, settings.pass_f1),
            }
        rows.append(row)
    return rows


def scored(
    run: Retrieved, overrides: Sequence[str], budget: int, answered: bool, cache: Path, settings: EvalSettings
) -> dict[str, Any]:
    """`score_budget`'s rows and seconds, cached per set, strategy, budget and answer stage."""
    spec = answer_stage_spec(overrides, run.strategy) if answered else None
    path = (
        cache
        / "index_structure"
        / "scores"
        / (f"{run.key}-b{budget}-{_digest(spec) if spec else 'unanswered'}-v{CACHE_FORMAT}.json")
    )
    if path.exists():
        return json.loads(path.read_text(encoding="utf-8"))
    stage = built_stage(json.dumps(spec, sort_keys=True)) if spec else None
    start = time.perf_counter()  # the stage warm: its model loads once per process
    rows = score_budget(run, budget, stage, settings)
    result = {"rows": rows, "seconds": time.perf_counter() - start}
    write_atomically(path, json.dumps(result).encode())
    return result


# --- summaries -------------------------------------------------------------------------------------------------


def mean_of(rows: Sequence[Mapping[str, Any]], key: str) -> float | None:
    values = [row[key] for row in rows if row.get(key) is not None]
    return statistics.fmean(values) if values else None


def summary(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    answered = any("layer" in row for row in rows)
    return {
        "recall": mean_of(rows, "recall"),
        "f1": mean_of(rows, "f1"),
        "tokens": mean_of(rows, "tokens"),
        "chunking": sum(row.get("layer") == CHUNKING for row in rows) if answered else None,
    }


def paired_change(base: Sequence[Mapping[str, Any]], other: Sequence[Mapping[str, Any]], key: str) -> str:
    """`other` minus `base` on `key` over the questions both have it for: mean [95 % CI]."""
    by_id = {row["id"]: row[key] for row in base if row.get(key) is not None}
    pairs = [(by_id[row["id"]], row[key]) for row in other if row.get(key) is not None and row["id"] in by_id]
    if not pairs:
        return "—"
    result = paired(key, [a for a, _ in pairs], [b for _, b in pairs])
    return f"{result.diff:+.3f} [{result.low:+.3f}, {result.high:+.3f}]"


# --- the report ------------------------------------------------------------------------------------------------


Results = dict[str, dict[str, dict[int, dict[str, Any]]]]  # set -> strategy -> budget -> {"rows", "seconds"}


def _cell(value: float | None, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def index_section(
    runs: dict[str, dict[str, Retrieved]], builds: Mapping[str, Mapping[str, Any]]
) -> list[str]:
    lines = [
        "## Index",
        "",
        "Chunks, snapshot size on disk, whether this benchmark found the index cached, and the seconds of a cold "
        "build (loading the embedder, splitting, embedding, writing the snapshot) with how they were measured.",
        "",
        "| set | strategy | chunks | size (MB) | found cached | cold build (s) | measured |",
        "|---|---|---:|---:|---|---:|---|",
    ]
    for name, by_strategy in runs.items():
        for strategy, run in by_strategy.items():
            index = run.index
            build = builds.get(index["fingerprint"])
            measured = (
                f"{build['how']}, {build['date']}" if build else "not recorded (--time-index measures it)"
            )
            lines.append(
                f"| {name} | {strategy} | {index['chunks']} | {index['bytes'] / 1e6:.1f} | "
                f"{'yes' if index['cached'] else 'no'} | {_cell(build['seconds'] if build else None, 0)} | "
                f"{measured} |"
            )
    return lines


def budget_section(results: Results, strategies: Sequence[str], budgets: Sequence[int]) -> list[str]:
    lines = [
        "## At equal context budgets",
        "",
        f"Per set, strategy and budget: mean context tokens used, context recall, answer F1 and the diagnosis's "
        f"`{CHUNKING}` count (questions whose evidence no single index chunk covers, among those answered "
        f"wrongly; the index's chunks are what a strategy retrieves, sentences for `sentence_window`, whose "
        "windows may still cover the quote), and each strategy minus "
        f"`{BASELINE}`, question by question: mean [paired bootstrap 95 % CI]. F1 and the diagnosis only at the "
        "budgets the answerer ran at (—: not run).",
        "",
        "| set | budget | strategy | tokens | context recall | Δ recall | answer F1 | Δ F1 | chunking |",
        "|---|---:|---|---:|---:|---|---:|---|---:|",
    ]
    for name, by_strategy in results.items():
        for budget in budgets:
            base = by_strategy[BASELINE][budget]["rows"]
            for strategy in strategies:
                rows = by_strategy[strategy][budget]["rows"]
                s = summary(rows)
                deltas = (
                    ("", "")
                    if strategy == BASELINE
                    else (paired_change(base, rows, "recall"), paired_change(base, rows, "f1"))
                )
                lines.append(
                    f"| {name} | {budget} | {strategy} | {_cell(s['tokens'], 0)} | {_cell(s['recall'])} | "
                    f"{deltas[0]} | {_cell(s['f1'])} | {deltas[1]} | {s['chunking'] if s['chunking'] is not None else '—'} |"
                )
    return lines


def mean_table(results: Results, strategies: Sequence[str], budgets: Sequence[int]) -> list[str]:
    lines = [
        "## Mean over sets",
        "",
        "| budget | strategy | tokens | context recall | answer F1 | chunking (sum) |",
        "|---:|---|---:|---:|---:|---:|",
    ]
    for budget in budgets:
        for strategy in strategies:
            per_set = [summary(by_strategy[strategy][budget]["rows"]) for by_strategy in results.values()]
            values = {
                key: [s[key] for s in per_set if s[key] is not None]
                for key in ("tokens", "recall", "f1", "chunking")
            }
            means = {key: statistics.fmean(v) if v else None for key, v in values.items()}
            chunking = str(sum(values["chunking"])) if values["chunking"] else "—"
            lines.append(
                f"| {budget} | {strategy} | {_cell(means['tokens'], 0)} | {_cell(means['recall'])} | "
                f"{_cell(means['f1'])} | {chunking} |"
            )
    return lines


def recall_table(results: Results, strategies: Sequence[str], budget: int) -> dict[str, dict[str, float]]:
    """Set -> strategy -> mean context recall at `budget`."""
    return {
        name: {s: summary(by_strategy[s][budget]["rows"])["recall"] or 0.0 for s in strategies}
        for name, by_strategy in results.items()
    }


def loso_section(
    results: Results, strategies: Sequence[str], budgets: Sequence[int], loso_budget: int
) -> list[str]:
    lines = ["## The default by leave-one-set-out", ""]
    if len(results) < 2 or len(strategies) < 2:
        return [*lines, "Needs at least two sets and two strategies."]
    scores = recall_table(results, strategies, loso_budget)
    folds = loso(scores, strategies)
    lines += [
        f"Context recall at {loso_budget} tokens relative to `{BASELINE}`. Per held-out set, the strategy with "
        f"the best worst case over the other sets (benchmarks/defaults_loso.py's rule; ties keep `{BASELINE}`), "
        "and how it fares on the held-out set.",
        "",
        f"| held-out set | chosen on the others | its recall | {BASELINE} | change |",
        "|---|---|---:|---:|---:|",
    ]
    for fold in folds:
        lines.append(
            f"| {fold.held_out} | `{fold.chosen}` | {fold.value:.3f} | {fold.baseline:.3f} | {fold.change:+.1%} |"
        )
    worst = min(folds, key=lambda fold: fold.change)
    chosen = choose(scores, strategies)
    worst_all = min(relative(s[chosen], s[BASELINE]) for s in scores.values())
    lines += [
        "",
        f"- Worst fold: {worst.held_out}, `{worst.chosen}` {worst.change:+.1%} against `{BASELINE}`.",
        f"- Decision, every set: `{chosen}` (its worst set {worst_all:+.1%} against `{BASELINE}`)"
        + (
            f"; `{BASELINE}` stays the default."
            if chosen == BASELINE
            else "; it beats the default on every set."
        ),
    ]
    for budget in (b for b in budgets if b != loso_budget):
        other = recall_table(results, strategies, budget)
        pick = choose(other, strategies)
        worst_fold = min(fold.change for fold in loso(other, strategies))
        lines.append(f"- At {budget} tokens: every set chooses `{pick}`; worst LOSO fold {worst_fold:+.1%}.")
    return lines


def timing_section(
    runs: dict[str, dict[str, Retrieved]], results: Results, answer_budgets: Sequence[int]
) -> list[str]:
    lines = [
        "## Run time",
        "",
        "Seconds as measured when each result was first computed (cached results keep them). "
        "Answering runs the default answer stage once a question per answered budget.",
        "",
        "| set | strategy | questions | retrieval (s) | answering, per budget (s) | scoring the rest (s) |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for name, by_strategy in runs.items():
        for strategy, run in by_strategy.items():
            budgets = results[name][strategy]
            answering = [budgets[b]["seconds"] for b in answer_budgets if b in budgets]
            rest = sum(value["seconds"] for b, value in budgets.items() if b not in answer_budgets)
            lines.append(
                f"| {name} | {strategy} | {len(run.items)} | {run.seconds:.0f} | "
                f"{statistics.fmean(answering) if answering else 0:.0f} | {rest:.0f} |"
            )
    return lines


def plot(results: Results, strategies: Sequence[str], budgets: Sequence[int], path: Path) -> None:
    """Context recall against the tokens used, one line per strategy (a point per budget), a panel per set and one
    for the mean over sets; the recall axis is shared and starts just below the lowest point."""
    panels = [*results, "mean over sets"]
    columns = min(5, len(panels))
    rows = math.ceil(len(panels) / columns)
    figure = Figure(figsize=(3.3 * columns, 2.8 * rows + 0.7), layout="constrained")
    axes = figure.subplots(rows, columns, squeeze=False, sharey=True)
    colours = ["#1f3b73", "#d1495b", "#edae49", "#00798c", "#66a182", "#8d6a9f", "#6c757d"]
    markers = ["o", "s", "^", "D", "v", "P", "X"]
    lowest = 1.0
    for ax, panel in zip(axes.flat, panels, strict=False):
        sets = list(results) if panel == "mean over sets" else [panel]
        for index, strategy in enumerate(strategies):
            points = [[summary(results[s][strategy][b]["rows"]) for s in sets] for b in budgets]
            x = [statistics.fmean(p["tokens"] or 0.0 for p in point) for point in points]
            y = [statistics.fmean(p["recall"] or 0.0 for p in point) for point in points]
            lowest = min(lowest, *y)
            ax.plot(
                x,
                y,
                marker=markers[index % len(markers)],
                color=colours[index % len(colours)],
                linewidth=1.8,
                markersize=6 - index % 3,
                alpha=0.9,
                label=strategy,
            )
        ax.set_title(panel, fontsize=10, fontweight="bold" if panel == "mean over sets" else "normal")
        ax.set_xticks(list(budgets))
        ax.set_xlabel("context tokens used (mean)", fontsize=8)
        ax.grid(alpha=0.3)
        ax.tick_params(labelsize=8)
    axes.flat[0].set_ylim(max(0.0, math.floor((lowest - 0.05) * 20) / 20), 1.01)
    for ax in axes.flat[len(panels) :]:
        ax.set_visible(False)
    for ax in axes[:, 0]:
        ax.set_ylabel("context recall", fontsize=9)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    figure.legend(
        handles, labels, loc="outside lower center", ncols=len(strategies), fontsize=9, frameon=False
    )
    figure.suptitle(
        f"Context recall at equal context budgets ({', '.join(map(str, budgets))} tokens)", fontsize=11
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)


# --- main ------------------------------------------------------------------------------------------------------


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sets", nargs="+", help="set names (default: every set)")
    parser.add_argument(
        "--strategies",
        nargs="+",
        choices=list(STRATEGIES),
        help="STRATEGIES' names (default: every one whose ingest option this tree has)",
    )
    parser.add_argument("--budgets", nargs="+", type=int, default=list(BUDGETS), help="context tokens")
    parser.add_argument(
        "--answer-budgets",
        nargs="*",
        type=int,
        default=list(ANSWER_BUDGETS),
        help="budgets the answer stage runs at (answer F1, the diagnosis)",
    )
    parser.add_argument("--loso-budget", type=int, default=LOSO_BUDGET)
    parser.add_argument("--halueval", choices=("auto", "yes", "no"), default="auto")
    parser.add_argument("--time-index", action="store_true", help="time a cold build of indexes found cached")
    parser.add_argument("--cache", type=Path, default=ROOT / cache_root())
    parser.add_argument("--out", type=Path, help=f"the report (default: {RESULTS}/<date>-index-structure.md)")
    args = parser.parse_args(argv)
    args.strategies = available(args.strategies or list(STRATEGIES))
    if BASELINE not in args.strategies:
        parser.error(
            f"--strategies: must include {BASELINE}, the baseline every other strategy is compared with"
        )
    if any(budget < 1 for budget in args.budgets) or not set(args.answer_budgets) <= set(args.budgets):
        parser.error("--budgets must be positive and --answer-budgets among them")
    if args.loso_budget not in args.budgets:
        parser.error(f"--loso-budget: {args.loso_budget} is not among --budgets {args.budgets}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    cache = args.cache.resolve()
    known = BUILTIN_SETS | doc_set_overrides(cache)
    names = args.sets or [n for n in known if n != "halueval" or args.halueval != "no"]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SystemExit(f"--sets: unknown {unknown}; known: {sorted(known)}")
    runs: dict[str, dict[str, Retrieved]] = {}
    results: Results = {}
    for name in names:
        found = {
            s: retrieve(name, known[name], s, args.budgets, cache, args.halueval, args.time_index)
            for s in args.strategies
        }
        if any(run is None for run in found.values()):
            continue
        runs[name] = {s: run for s, run in found.items() if run is not None}
        settings = validate(compose([PIPELINE, *known[name]])).eval
        results[name] = {
            s: {
                b: scored(run, known[name], b, b in args.answer_budgets, cache, settings)
                for b in args.budgets
            }
            for s, run in runs[name].items()
        }
    if not results:
        raise SystemExit("no set to report")
    out = args.out or RESULTS / f"{datetime.date.today().isoformat()}-index-structure.md"
    figure = out.with_suffix(".png")
    plot(results, args.strategies, args.budgets, figure)
    report = "\n".join(report_lines(args, argv, runs, results, figure.name))
    print(report)
    write_result(report, out, "index-structure")
    print(f"wrote {figure}")
    return 0


def report_lines(
    args: argparse.Namespace,
    argv: Sequence[str] | None,
    runs: dict[str, dict[str, Retrieved]],
    results: Results,
    figure: str,
) -> list[str]:
    command_line = command("benchmarks.index_structure", argv, options=("--out", "--cache"))
    strategies = ", ".join(f"`{s}` ({' '.join(STRATEGIES[s])})" for s in args.strategies)
    answered = (
        f"The default answer stage (`by_type`) answers from it at {', '.join(map(str, args.answer_budgets))} tokens."
        if args.answer_budgets
        else "No answer stage ran (`--answer-budgets` named no budget), so this report has no answer F1."
    )
    return [
        report_header(command_line),
        "",
        f"# Index strategies at equal context budgets ({datetime.date.today().isoformat()})",
        "",
        f"Written by `{command_line}` on {machine()}. Sets: {', '.join(results)}. Strategies (STRATEGIES in "
        f"benchmarks/index_structure.py): {strategies}. Each question is retrieved once (`{PIPELINE}`, offline "
        f"models, the top {DEPTH}); per budget the answer stage's context is the strategy's widened top k hits for "
        "the smallest k that reaches the budget, packed best first and cut to it (a context holds at most the "
        f"budget, counted as `context/tokens` counts). {answered}",
        "",
        f"![Context recall against context tokens, one line per strategy]({figure})",
        "",
        *loso_section(results, args.strategies, args.budgets, args.loso_budget),
        "",
        *mean_table(results, args.strategies, args.budgets),
        "",
        *budget_section(results, args.strategies, args.budgets),
        "",
        *index_section(runs, cold_builds(args.cache.resolve())),
        "",
        *timing_section(runs, results, args.answer_budgets),
        "",
    ]


if __name__ == "__main__":
    sys.exit(main())
