"""`ragtune harvest`: production failures as golden-set candidates, and reviewed candidates into a golden set.

    ragtune harvest MODEL --out candidates.jsonl [--since 7d] [--force]
    ragtune harvest --append reviewed.jsonl --to data/x/golden.jsonl

A served model's traces (serving.online.traces) in the window become candidates when the user was not satisfied
(the rule of `ragtune online-report`), when the request was refused (the reviewer decides whether it was answerable)
or when the answer holds unsupported sentences. Each candidate is one golden JSONL line marked
`"status": "candidate"`: the question, the rater's correct answer as `reference_answer` when one was given, and
evidence quotes proposed from the passages the answer cited (the cited snippet's sentence that best overlaps the
correct answer, else the answer: verbatim chunk text, so the golden locator finds it when the file is loaded).
A candidate with no reference is marked `"answerable": false`, which is what the loader would assume of it; the
reviewer flips it. Provenance goes to x_ fields. Questions that are the same once case, width, whitespace and
punctuation are normalised, or near-duplicates by character-bigram similarity (which works for Chinese and English
alike), are merged into one candidate.

Traces served with serve.trace.content=redacted or none keep no question text: they are listed by id and counted,
never written. `--append` adds a reviewed file to a golden set: it refuses candidates, ids or questions the set
already holds, and anything the strict parser refuses, and keeps the set's existing lines byte for byte.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mlflow
from mlflow.entities import Trace

from components.common.sentences import split_sentences, strip_citations, support
from experiments.datasets.golden.items import CANDIDATE, GoldenError, GoldenItem
from experiments.datasets.golden.parsing import parse_golden_file
from experiments.runs.output_dir import check_output_file
from experiments.runs.tracking import connect
from pipelines.errors import UserError
from pipelines.run_layout import (
    TRACE_CONTENT_TAG,
    TRACE_REFUSED_TAG,
    TRACE_STATUS_TAG,
    TRACE_VARIANT_TAG,
    quality_tag,
)
from serving.online.report import (
    MODEL_HELP,
    model_window_arguments,
    rated_satisfied,
    rating_of,
    served_experiment,
    traces_since,
    window_ms,
)

DOWN_RATED, REFUSED, UNSUPPORTED = "down_rated", "refused", "unsupported"
REASONS = (DOWN_RATED, REFUSED, UNSUPPORTED)
# Questions whose character-bigram sets overlap this much (Jaccard) are one question asked twice.
NEAR_DUPLICATE = 0.75
MAX_QUOTES = 3
ID_PREFIX = "harvest-"


@dataclass
class Failure:
    """One failing trace: why it fails, and its texts when serve.trace.content kept them."""

    trace_id: str
    variant: str
    reasons: list[str]
    question: str | None = None
    answer: str | None = None
    snippets: list[str] = field(default_factory=list)
    correct_answer: str | None = None


def reasons_of(trace: Trace) -> list[str]:
    """Why a trace is a candidate: an unsatisfied rating, a refused answer (not an error reply), unsupported
    sentences."""
    tags, rating = trace.info.tags, rating_of(trace)
    reasons = [DOWN_RATED] if rating is not None and not rated_satisfied(rating) else []
    if tags.get(TRACE_STATUS_TAG) == "200" and tags.get(TRACE_REFUSED_TAG) == "true":
        reasons.append(REFUSED)
    if float(tags.get(quality_tag("unsupported_sentence_rate")) or 0) > 0:
        reasons.append(UNSUPPORTED)
    return reasons


def failure(trace: Trace, reasons: list[str]) -> Failure:
    """The failure with its question, answer, cited snippets and correct answer read back from the full trace;
    without a question when the trace kept no text of it (content redacted or none)."""
    found = Failure(trace.info.trace_id, trace.info.tags.get(TRACE_VARIANT_TAG, "champion"), reasons)
    if trace.info.tags.get(TRACE_CONTENT_TAG, "full") != "full":
        return found
    full = mlflow.MlflowClient().get_trace(trace.info.trace_id)
    root = next((s for s in full.data.spans if s.parent_id is None), None)
    question = ((root.inputs if root else None) or {}).get("question")
    if not isinstance(question, str):
        return found
    outputs = (root.outputs if root else None) or {}
    rating = rating_of(trace)
    correct = (rating.metadata or {}).get("correct_answer") if rating is not None else None
    found.question = question
    found.answer = outputs.get("answer") if isinstance(outputs.get("answer"), str) else None
    found.snippets = [c["snippet"] for c in outputs.get("citations") or [] if isinstance(c.get("snippet"), str)]
    found.correct_answer = (correct.strip() or None) if isinstance(correct, str) else None
    return found


def question_key(text: str) -> str:
    """The comparison form of a question: NFKC (full-width to half-width), case-folded, punctuation, symbols and
    whitespace runs made one space."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return " ".join("".join(" " if unicodedata.category(c)[0] in "PSZ" else c for c in folded).split())


def bigrams(key: str) -> set[str]:
    """Character bigrams of a question key without its spaces: Chinese has none between words."""
    chars = key.replace(" ", "")
    return {chars[i:i + 2] for i in range(max(1, len(chars) - 1))}


def similar(a: set[str], b: set[str]) -> bool:
    return len(a & b) / len(a | b) >= NEAR_DUPLICATE


def groups(failures: Sequence[Failure]) -> list[list[Failure]]:
    """Failures merged by question: same key, or a near-duplicate of a group's first question; in first-seen
    order."""
    found: list[tuple[set[str], list[Failure]]] = []
    by_key: dict[str, list[Failure]] = {}
    for item in failures:
        key = question_key(item.question or "")
        if key in by_key:
            by_key[key].append(item)
            continue
        grams = bigrams(key)
        group = next((g for first, g in found if similar(grams, first)), None)
        if group is None:
            group = []
            found.append((grams, group))
        group.append(item)
        by_key[key] = group
    return [group for _, group in found]


def quotes(snippets: Iterable[str], target: str) -> list[str]:
    """Evidence proposed from cited snippets: each snippet's sentence that best overlaps `target` (by its content
    terms), best first; verbatim text of a chunk."""
    best: dict[str, float] = {}
    for snippet in dict.fromkeys(snippets):
        scored = [(support(target, [s]), s) for s in split_sentences(snippet)]
        score, sentence = max(scored, default=(0.0, ""), key=lambda pair: pair[0])
        if score > 0:
            best[sentence] = max(score, best.get(sentence, 0.0))
    return sorted(best, key=best.__getitem__, reverse=True)[:MAX_QUOTES]


def candidate(group: list[Failure]) -> dict[str, Any]:
    """One golden JSONL record for a group of failures asking the same question."""
    counts = Counter(item.question for item in group)
    question = max(counts, key=counts.__getitem__)  # the most asked wording; the first seen on a tie
    correct = next((item.correct_answer for item in group if item.correct_answer), None)
    answers = list(dict.fromkeys(item.answer for item in group if item.answer))
    target = correct or " ".join(strip_citations(a) for a in answers)
    evidence = quotes((s for item in group for s in item.snippets), target) if target else []
    record: dict[str, Any] = {"id": ID_PREFIX + hashlib.sha256(question_key(question).encode()).hexdigest()[:12],
                              "question": question}
    if correct:
        record["reference_answer"] = correct
    if evidence:
        record["evidence"] = evidence
    if not (correct or evidence):
        record["answerable"] = False
    return record | {
        "status": CANDIDATE,
        "x_answer_given": answers,
        "x_reasons": [r for r in REASONS if any(r in item.reasons for item in group)],
        "x_trace_ids": [item.trace_id for item in group],
        "x_variants": sorted({item.variant for item in group}),
        "x_count": len(group),
    }


def harvest(args: argparse.Namespace, window: int) -> int:
    check_output_file(args.out, args.force)
    connect(args.tracking_uri, key="--tracking-uri")
    experiment_id, _ = served_experiment(args.model, args.experiment)
    read, failing = 0, []
    for trace in traces_since(experiment_id, int(time.time() * 1000) - window):
        read += 1
        if reasons := reasons_of(trace):
            failing.append((trace.info.request_time, failure(trace, reasons)))
    failures = [f for _, f in sorted(failing, key=lambda pair: pair[0])]  # oldest first: the file's order is stable
    unreadable = [f for f in failures if f.question is None]
    merged = groups([f for f in failures if f.question is not None])
    records = [candidate(group) for group in merged]
    by_reason = Counter(r for record in records for r in record["x_reasons"])
    if records:
        from experiments.datasets.testset import write_atomically

        write_atomically(args.out, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
    wrote = f"wrote {args.out}" if records else "nothing written"
    duplicates = len(failures) - len(unreadable) - len(records)
    print(f"harvest: read {read} traces of {args.model} (last {args.since}); {len(records)} candidates ("
          + ", ".join(f"{r} {by_reason[r]}" for r in REASONS) + f"); merged {duplicates} duplicates; {wrote}")
    if unreadable:
        counts = Counter(r for f in unreadable for r in f.reasons)
        print(f"unreadable: {len(unreadable)} failing traces (" + ", ".join(f"{r} {counts[r]}" for r in REASONS)
              + "): " + " ".join(f.trace_id for f in unreadable))
        print(f"ragtune harvest: {len(unreadable)} failing traces kept no question text (served with "
              "serve.trace.content=redacted or none), so they cannot become candidates; their ids are listed above "
              "(serve.trace.content=full keeps the text)", file=sys.stderr)
    return 0


def append(reviewed: Path, golden: Path) -> int:
    """Appends the reviewed items to the golden set; a UserError naming file:line for the first refusal."""
    for path in (reviewed, golden):
        if not path.is_file():
            raise UserError(f"{path}: no such file")
    kept = _parsed(golden)
    ids = {item.id: line for line, item in kept}
    questions = {question_key(item.question): f"{golden}:{line}" for line, item in kept}
    problems = []
    added = _parsed(reviewed)
    for line, item in added:
        where = f"{reviewed}:{line} (id={item.id})"
        if item.candidate:
            problems.append(f'{where}: still "status": "{CANDIDATE}"; review it, then mark it "reviewed"')
        elif item.id in ids:
            problems.append(f"{where}: id already in {golden}:{ids[item.id]}")
        elif (key := question_key(item.question)) in questions:
            problems.append(f"{where}: question already in {questions[key]}")
        else:
            questions[key] = f"{reviewed}:{line}"
    if problems:
        raise UserError(problems[0] + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""))
    with reviewed.open(encoding="utf-8-sig") as handle:  # lines as the parser reads them (not at U+2028)
        lines = [text.rstrip("\r\n") for text in handle if text.strip()]
    existing = golden.read_bytes().decode("utf-8")
    newline = "\r\n" if "\r\n" in existing else "\n"
    separator = newline if existing and not existing.endswith("\n") else ""
    from experiments.datasets.testset import write_atomically

    write_atomically(golden, existing + separator + "".join(line + newline for line in lines))
    print(f"harvest: appended {len(added)} reviewed items from {reviewed} to {golden} ({len(kept) + len(added)} "
          "items now)")
    return 0


def _parsed(path: Path) -> list[tuple[int, GoldenItem]]:
    """The file's items by line; its first problem as one line (and how many more) when the strict parser refuses
    it."""
    try:
        parsed = parse_golden_file(path)
    except GoldenError as e:
        more = f" (and {len(e.problems) - 1} more)" if len(e.problems) > 1 else ""
        raise UserError(e.problems[0] + more) from None
    if not parsed:
        raise UserError(f"{path}: no golden items (the file is empty)")
    return parsed


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", nargs="?", help=MODEL_HELP)
    parser.add_argument("--out", type=Path, help="the candidates' golden JSONL file")
    parser.add_argument("--force", action="store_true", help="overwrite --out if it exists")
    model_window_arguments(parser)
    parser.add_argument("--append", type=Path, metavar="REVIEWED", help="a reviewed file to add to --to")
    parser.add_argument("--to", type=Path, metavar="GOLDEN", help="the golden set --append adds to")
    args = parser.parse_args(argv)
    if args.append is not None or args.to is not None:
        if args.append is None or args.to is None or args.model or args.out:
            parser.error("--append REVIEWED --to GOLDEN go together, without MODEL or --out")
        return append(args.append, args.to)
    if args.model is None or args.out is None:
        parser.error("MODEL and --out are required (or --append REVIEWED --to GOLDEN)")
    return harvest(args, window_ms(parser, args.since))
