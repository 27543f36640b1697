"""Does a generated golden set rank configurations the way the human-written questions of the same corpus do?

    python -m benchmarks.testset_tau                  # demo-en, demo-zh and every set under .cache/ragtune/doc_sets/
    python -m benchmarks.testset_tau --sets demo-en python_faq-en --size 60
    python -m benchmarks.testset_tau --generator llm --chat models=openai_compatible \
        models.generator.base_url=http://localhost:8000/v1 models.generator.model=Qwen/Qwen2.5-7B-Instruct

Per set, `ragtune testset`'s generator writes questions from the corpus alone (experiments/datasets/testset.py);
then each configuration below (pipelines x fusion x candidates x BM25 parameters, retrieval only) is built once
over the set's index and answers both the human-written golden questions and the generated ones. Kendall's tau
between the two MRR@10 columns says whether the generated set orders the configurations as the human one does:
a generated set is useful for choosing among configurations only where tau is high. `--generator llm` drafts
with the chat model `--chat` overrides name (models.chat; offline SmolLM2 by default); a set where fewer than
MIN_QUESTIONS generated questions pass the filters gets no tau. Writes docs/results/<date>-testset-tau[-llm].md.
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from haystack import Document
from omegaconf import DictConfig
from scipy.stats import kendalltau

from benchmarks.common import ROOT, command, machine_line, report_header, write_result
from components.common.paths import cache_root
from experiments.datasets.golden.items import GoldenItem
from experiments.datasets.llm_questions import LlmQuestionWriter
from experiments.datasets.testset import GENERATORS, generate_testset, llm_writer
from experiments.evaluation.evaluate import evaluate
from experiments.evaluation.settings import EvalSettings
from experiments.runs.config import compose, validate
from experiments.runs.indexed import prepare_pipeline
from pipelines.models import generator_identity

DOC_SETS = ROOT / cache_root() / "doc_sets"
METRIC = "retrieval/mrr_at_10"
CONFIGS: dict[str, list[str]] = {
    "bm25": ["pipeline=bm25"],
    "bm25 k1=0.6 b=0.3": ["pipeline=bm25", "retriever.bm25.k1=0.6", "retriever.bm25.b=0.3"],
    "bm25_haystack": ["pipeline=bm25_haystack"],
    "dense": ["pipeline=dense"],
    "hybrid dbsf": ["pipeline=hybrid"],
    "hybrid rrf": ["pipeline=hybrid", "retriever.fusion.mode=rrf"],
    "hybrid merge": ["pipeline=hybrid", "retriever.fusion.mode=merge"],
    "hybrid concatenate": ["pipeline=hybrid", "retriever.fusion.mode=concatenate"],
    "hybrid candidates=5": ["pipeline=hybrid", "retriever.candidates=5"],
}
HUMAN_QUESTIONS = 150  # a seeded sample of larger human sets, to bound the time
MIN_QUESTIONS = 10  # fewer generated questions give no ranking worth a tau


@dataclass(frozen=True)
class SetResult:
    name: str
    human: int
    generated: int
    drafts: str  # what the generator drafted, and what was unreadable or filtered
    scores: dict[str, tuple[float, float]]  # config -> (human MRR@10, generated MRR@10); empty: too few generated

    @property
    def tau(self) -> tuple[float, float] | None:
        if not self.scores:
            return None
        human, generated = zip(*self.scores.values(), strict=True)
        result = kendalltau(human, generated)
        return float(result.statistic), float(result.pvalue)


def set_overrides(name: str) -> list[str]:
    if name in ("demo-en", "demo-zh"):
        return ["dataset=demo", f"dataset.subset={name[-2:]}", "dataset.golden=[golden.jsonl]"]
    folder = DOC_SETS / name
    return ["dataset=local", f"dataset.name={name}", f"dataset.corpus_dir={folder / 'corpus'}",
            f"dataset.golden={folder / 'golden.jsonl'}"]


def generated_questions(
    documents: Sequence[Document], size: int, seed: int, writer: LlmQuestionWriter | None
) -> tuple[list[GoldenItem], str]:
    """The answerable questions the generator keeps (the templates', or the LLM `writer`'s drafts), and a note of
    how many drafts it wrote and how many the filters kept."""
    drafted, unreadable = None, ""
    if writer is not None:
        failed_before = writer.failed_replies  # the writer counts over every set
        drafted = list(writer.drafts(documents, 2 * size, seed))
        unreadable = f" ({writer.failed_replies - failed_before} replies unreadable)"
    report = generate_testset(documents, size, seed, drafted=drafted, generator="offline" if writer is None else "llm")
    print(f"  {' / '.join(report.lines())}", file=sys.stderr)
    return [item for item in report.kept if item.answerable], f"{report.drafted}{unreadable}, {len(report.kept)} kept"


def measure(name: str, size: int, seed: int, writer: LlmQuestionWriter | None) -> SetResult:
    settings = EvalSettings(ks=[10], trace_sample=0)
    generated: list[GoldenItem] = []
    human: list[GoldenItem] = []
    drafts = ""
    scores = {}
    for label, overrides in CONFIGS.items():
        prepared = prepare_pipeline(validate(compose([*set_overrides(name), *overrides])))
        if not human:
            generated, drafts = generated_questions(prepared.dataset.documents, size, seed, writer)
            human = [item for item in prepared.dataset.golden if item.answerable]
            human = random.Random(seed).sample(human, min(HUMAN_QUESTIONS, len(human)))
            if len(generated) < MIN_QUESTIONS:
                print(f"  {name}: {len(generated)} generated questions, no tau", file=sys.stderr)
                return SetResult(name, len(human), len(generated), drafts, {})
        prepared.index()
        prepared.warm_up()
        on_human = evaluate(prepared.query, human, settings, progress=False).metrics[METRIC]
        on_generated = evaluate(prepared.query, generated, settings, progress=False).metrics[METRIC]
        scores[label] = (on_human, on_generated)
        print(f"  {name:24} {label:22} human {on_human:.3f}  generated {on_generated:.3f}", file=sys.stderr)
    return SetResult(name, len(human), len(generated), drafts, scores)


def report(results: Sequence[SetResult], command_line: str, size: int, generator: str) -> str:
    lines = [
        report_header(command_line),
        "",
        "# Generated golden sets: do they rank configurations as human-written questions do?",
        "",
        f"{machine_line()} "
        f"Generator: {generator}, {size} questions asked per set, the answerable ones scored (a set with fewer "
        f"than {MIN_QUESTIONS} gets no tau). Human questions: the set's own golden questions (FAQ and manual headings for "
        f"the doc sets), a seeded sample of at most {HUMAN_QUESTIONS}. Metric: {METRIC} of {len(CONFIGS)} "
        "retrieval configurations, each built once over the set's index and asked both sets.",
        "",
        "| set | human questions | drafts | generated questions scored | Kendall tau | p |",
        "|---|---|---|---|---|---|",
    ]
    for result in results:
        tau = "– | –" if result.tau is None else f"{result.tau[0]:.2f} | {result.tau[1]:.3f}"
        lines.append(f"| {result.name} | {result.human} | {result.drafts} | {result.generated} | {tau} |")
    scored = [r for r in results if r.scores]
    if not scored:
        return "\n".join(lines) + "\n"
    lines += ["", "MRR@10 per configuration (human / generated):", "",
              "| configuration | " + " | ".join(r.name for r in scored) + " |",
              "|---" * (len(scored) + 1) + "|"]
    for label in CONFIGS:
        cells = [f"{r.scores[label][0]:.3f} / {r.scores[label][1]:.3f}" for r in scored]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def generator_label(model: DictConfig | None) -> str:
    """The report's name for the generator; `model` is the LLM writer's models.chat."""
    if model is None:
        return "offline (`ragtune testset`, templates, no LLM)"
    base_url = model.endpoint.base_url if model.get("endpoint") else None
    identity = generator_identity({"model": model.model, "base_url": base_url})
    return f"LLM (`ragtune testset --generator llm`, models.chat {identity})"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    default_sets = ["demo-en", "demo-zh", *sorted(p.name for p in DOC_SETS.glob("*") if (p / "golden.jsonl").exists())]
    parser.add_argument("--sets", nargs="*", default=default_sets)
    parser.add_argument("--size", type=int, default=60)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--generator", choices=GENERATORS, default="offline")
    parser.add_argument("--chat", nargs="*", default=[], help="overrides naming the LLM generator's models.chat")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    chat = compose(args.chat).models.chat if args.generator == "llm" else None
    writer = None
    if chat is not None:  # one writer for every set: its model loads once
        writer = llm_writer(chat)
        writer.warm_up()
    results = [measure(name, args.size, args.seed, writer) for name in args.sets]
    command_line = command("benchmarks.testset_tau", argv, options=["--out"])  # not a setting
    text = report(results, command_line, args.size, generator_label(chat))
    print(text)
    suffix = "-llm" if chat is not None else ""
    write_result(text, args.out, f"testset-tau{suffix}", sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
