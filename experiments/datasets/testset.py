"""`ragtune testset`: a golden set bootstrapped from a corpus, for a corpus that has none.

    ragtune testset dataset=local dataset.corpus_dir=DIR --out golden.jsonl [--force] [--size 60]
        [--generator offline|llm]

A generator drafts questions: `offline` (experiments/datasets/offline_questions.py: templates, no LLM) or `llm`
(experiments/datasets/llm_questions.py: the chat model of `models.chat`, held to a JSON schema). Every draft then
passes the same filters: it shares a content word with its passage (its topic is there), its evidence is found in
the corpus, it is no near-duplicate of a kept question, it copies at most `--max-copied` characters of its evidence
verbatim, and its answer shares a content word with the evidence.
The kept questions are spread over categories and documents (unanswerable ones capped at `--unanswerable`), written
in the golden JSONL format, and what each filter dropped is printed. `--out` is checked before any work (an existing
file is kept unless `--force`) and written whole or not at all.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from pathlib import Path
from typing import Any

from haystack import Document
from omegaconf import OmegaConf
from rapidfuzz import fuzz
from tqdm import tqdm

from components.common.sentences import content_terms
from components.common.text import detect_language
from experiments.datasets.base import seeded_rank
from experiments.datasets.golden.evidence import locate_each
from experiments.datasets.golden.items import GoldenItem
from experiments.datasets.llm_questions import SCHEMA, UNANSWERABLE_SCHEMA, LlmQuestionWriter
from experiments.datasets.offline_questions import UNANSWERABLE, Draft, drafts
from experiments.runs.output_dir import check_output_file

GENERATORS = ("offline", "llm")
MAX_COPIED = 48
NEAR_DUPLICATE = 90.0  # rapidfuzz ratio, 0-100
UNANSWERABLE_SHARE = 0.15
PROGRESS_ABOVE = 1_000_000  # characters of corpus: smaller ones are done before a bar would help
NOTHING_KEPT = {
    "offline": "the corpus has too few sentences with a number, a defined term or an instruction to ask about",
    "llm": "the chat model's quotes were not found in the corpus or its questions left their passages' topics; "
           "try a larger models.chat, or --generator offline",
}


@dataclass
class Report:
    """What the filters did: drafts in, dropped by each filter, kept."""

    drafted: int = 0
    dropped: Counter[str] = field(default_factory=Counter)
    kept: list[GoldenItem] = field(default_factory=list)

    def lines(self) -> list[str]:
        by = Counter((item.category, detect_language(item.question)) for item in self.kept)
        dropped = ", ".join(f"{reason} {n}" for reason, n in sorted(self.dropped.items())) or "none"
        return [
            f"{self.drafted} drafts; dropped: {dropped}",
            f"{len(self.kept)} questions: " + ", ".join(f"{c}/{lang} {n}" for (c, lang), n in sorted(by.items())),
        ]


def generate_testset(
    documents: Sequence[Document],
    size: int,
    seed: int = 0,
    max_copied: int = MAX_COPIED,
    unanswerable_share: float = UNANSWERABLE_SHARE,
    drafted: Iterable[Draft] | None = None,
    generator: str = "offline",
) -> Report:
    """Drafts from the corpus (the offline templates', unless `drafted` gives others, e.g. an LLM's), filtered,
    then `size` of them spread over categories and documents."""
    report = Report()
    quiet = sum(len(doc.content or "") for doc in documents) <= PROGRESS_ABOVE
    candidates = list(tqdm(drafts(documents) if drafted is None else drafted, desc="drafting questions",
                           unit=" drafts", disable=quiet))
    report.drafted = len(candidates)
    passed = [d for d in tqdm(candidates, desc="filtering drafts", unit=" drafts", disable=quiet)
              if _keep(d, max_copied, report)]
    located = locate_each([_golden_item(d, f"draft-{i}", generator) for i, d in enumerate(passed)], documents)
    found = []
    for draft, item in zip(passed, located, strict=True):
        if item is None:
            report.dropped["evidence not found"] += 1
        else:
            found.append((draft, item))
    chosen = _spread(found, size, seed, unanswerable_share, report)
    report.kept = [dataclasses.replace(item, id=f"gen-{n:04d}") for n, (_, item) in enumerate(chosen, start=1)]
    return report


def _keep(draft: Draft, max_copied: int, report: Report) -> bool:
    if not content_terms(draft.question) & content_terms(draft.evidence):
        report.dropped["question off its passage's topic"] += 1  # "What is the answer to this question?"
        return False
    if draft.answerable:
        copied = SequenceMatcher(None, draft.question, draft.evidence, autojunk=False)
        match = copied.find_longest_match(0, len(draft.question), 0, len(draft.evidence))
        if match.size > max_copied:
            report.dropped[f"copies over {max_copied} characters"] += 1
            return False
        if not content_terms(draft.answer or "") & content_terms(draft.evidence):
            report.dropped["answer not in evidence"] += 1
            return False
    return True


def _spread(
    found: Sequence[tuple[Draft, GoldenItem]], size: int, seed: int, unanswerable_share: float, report: Report
) -> list[tuple[Draft, GoldenItem]]:
    """Round-robin over categories, each in a seeded order that puts a document's first questions first; near
    duplicates of a kept question are skipped; unanswerable ones at most their share."""
    queues: dict[str, list[tuple[Draft, GoldenItem]]] = {}
    for pair in sorted(found, key=lambda p: seeded_rank(seed, p[0].question)):
        queues.setdefault(pair[0].category, []).append(pair)
    for category, queue in queues.items():  # each document's first question, then each one's second, ...
        per_doc: Counter[str] = Counter()
        ranked = []
        for position, pair in enumerate(queue):
            ranked.append((per_doc[pair[0].doc_id], position, pair))
            per_doc[pair[0].doc_id] += 1
        queues[category] = [pair for *_, pair in sorted(ranked, key=lambda r: r[:2])]
    cap = {UNANSWERABLE: max(1, round(size * unanswerable_share))}
    chosen: list[tuple[Draft, GoldenItem]] = []
    taken: Counter[str] = Counter()
    while len(chosen) < size and any(queues.values()):
        for category in sorted(queues):
            queue = queues[category]
            if taken[category] >= cap.get(category, size):
                queue.clear()
            while queue and len(chosen) < size:
                pair = queue.pop(0)
                if any(fuzz.ratio(pair[0].question, kept.question) >= NEAR_DUPLICATE for kept, _ in chosen):
                    report.dropped["near-duplicate question"] += 1
                    continue
                chosen.append(pair)
                taken[category] += 1
                break
    answerable = sum(1 for draft, _ in chosen if draft.answerable)
    keep = round(answerable * unanswerable_share / (1 - unanswerable_share))  # the share of what was kept
    unanswerable = [pair for pair in chosen if not pair[0].answerable][keep:]
    return [pair for pair in chosen if pair not in unanswerable]


def _golden_item(draft: Draft, item_id: str, generator: str) -> GoldenItem:
    if not draft.answerable:
        return GoldenItem(id=item_id, question=draft.question, category=UNANSWERABLE, answerable=False,
                          extra={"x_topic_source": draft.doc_id, "x_generator": generator})
    return GoldenItem(id=item_id, question=draft.question, reference_answer=draft.answer, evidence=(draft.evidence,),
                      source=draft.doc_id, category=draft.category, answerable=True,
                      extra={"x_generator": generator})


def golden_lines(items: Iterable[GoldenItem]) -> list[str]:
    """The golden JSONL lines of `items` (docs/datasets.md#golden-jsonl)."""
    lines = []
    for item in items:
        record: dict[str, Any] = {"id": item.id, "question": item.question}
        if item.reference_answer is not None:
            record["reference_answer"] = item.reference_answer
        if item.evidence:
            record |= {"evidence": list(item.evidence), "source": item.source}
        record |= {"category": item.category, "answerable": item.answerable, **item.extra}
        lines.append(json.dumps(record, ensure_ascii=False) + "\n")
    return lines


def llm_writer(chat: Any) -> LlmQuestionWriter:
    """The question writer on `models.chat`: its model and endpoint, held to the writer's two JSON schemas. An
    endpoint that is unreachable or lacks its key fails here, before the corpus is read."""
    from pipelines.chat_models import json_chat_generator
    from pipelines.models import check_endpoint

    endpoint = OmegaConf.to_container(chat.endpoint, resolve=True) if chat.get("endpoint") else None
    if endpoint is not None:
        check_endpoint(endpoint, key="models.chat.endpoint")
    answerable = json_chat_generator(str(chat.model), SCHEMA, max_tokens=200, endpoint=endpoint)
    unanswerable = json_chat_generator(str(chat.model), UNANSWERABLE_SCHEMA, max_tokens=80, endpoint=endpoint)
    return LlmQuestionWriter(answerable, unanswerable)


def write_atomically(path: Path, text: str) -> None:
    """`text` into a temporary file beside `path`, then renamed over it: an interrupted run leaves the old file or
    none, never half a file; the temporary file is removed on failure."""
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    handle = staging.open("x", encoding="utf-8")  # never an existing file or link; ours to remove from here on
    try:
        with handle:
            handle.write(text)
        os.replace(staging, path)
    except BaseException:
        staging.unlink(missing_ok=True)
        raise


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="ragtune testset", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("overrides", nargs="*", help="dataset overrides as for run.py, e.g. dataset=local ...")
    parser.add_argument("--out", type=Path, required=True, help="the golden JSONL to write")
    parser.add_argument("--force", action="store_true", help="overwrite --out if it exists")
    parser.add_argument("--size", type=int, default=60, help="questions to keep (default 60)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--generator", choices=GENERATORS, default="offline",
                        help="offline: templates, no LLM; llm: the chat model of models.chat (default offline)")
    parser.add_argument("--passages", type=int, help="passages the LLM writes from (default: twice --size)")
    parser.add_argument("--max-copied", type=int, default=MAX_COPIED,
                        help=f"longest verbatim run of the evidence a question may copy (default {MAX_COPIED})")
    parser.add_argument("--unanswerable", type=float, default=UNANSWERABLE_SHARE,
                        help=f"share of unanswerable questions at most, in [0, 1) (default {UNANSWERABLE_SHARE})")
    args = parser.parse_args(argv)
    for flag, value in (("--size", args.size), ("--passages", args.passages)):
        if value is not None and value < 1:
            parser.error(f"{flag} must be at least 1, got {value}")
    if args.max_copied < 0:
        parser.error(f"--max-copied must be at least 0, got {args.max_copied}")
    if not 0 <= args.unanswerable < 1:  # a share of the kept set; 1 would leave no answerable question to score
        parser.error(f"--unanswerable must be in [0, 1), got {args.unanswerable}")
    check_output_file(args.out, args.force)
    from experiments.datasets import corpus_documents
    from experiments.datasets.settings import dataset_settings
    from experiments.runs.config import compose

    cfg = compose(args.overrides)
    writer = llm_writer(cfg.models.chat) if args.generator == "llm" else None
    documents, skipped = corpus_documents(dataset_settings(cfg.dataset), Path(cfg.paths.cache))
    for doc_id, reason in skipped.items():
        print(f"skipped {doc_id}: {reason}", file=sys.stderr)
    drafted = None
    if writer is not None:
        writer.warm_up()
        drafted = list(writer.drafts(documents, args.passages or 2 * args.size, args.seed))
        print(f"{writer.failed_replies} LLM replies could not be read", file=sys.stderr)
    report = generate_testset(documents, args.size, args.seed, args.max_copied, args.unanswerable, drafted,
                              args.generator)
    for line in report.lines():
        print(line, file=sys.stderr)
    if not report.kept:  # an empty golden set would only fail later, at the run that loads it
        print(f"error: no question passed the filters, {args.out} not written: {NOTHING_KEPT[args.generator]}",
              file=sys.stderr)
        return 1
    write_atomically(args.out, "".join(golden_lines(report.kept)))
    print(f"wrote {args.out} ({len(report.kept)} questions, generator {args.generator})", file=sys.stderr)
    return 0
