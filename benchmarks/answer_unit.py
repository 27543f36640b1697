"""The unit of the offline answer, a quoted span, a quoted sentence or one chosen by the question's wording, checked
by leave-one-set-out over every set with reference answers.

    python -m benchmarks.answer_unit                      # every set; writes docs/results/<date>-answer-unit.md
    python -m benchmarks.answer_unit --sets demo-en git_manual-en maint_guide-zh --out /tmp/unit.md

The sets: the demo's two halves, HaluEval-200 when its index is cached, and every set experiments/datasets/doc_sets/
has built whose questions carry a reference answer (the sets with section headings as queries have none).

Per set, the hybrid retrieval runs once per question (benchmarks/fusion_loso.py's candidate lists, cached and
shared); its output is the context of each unit's own answer stage (conf/answer/<unit>.yaml, built alone by
pipelines/builder.py), whose answer the product's metric scores (experiments/evaluation/answer_metrics.py: token F1
against `reference_answer`, 0 for a refusal). Answers are cached per set and stage under
`<paths.cache>/answer_unit/`, so a rerun only scores. `answer=by_type` and its variants take, per question, the
span answer or the sentence answer by their rule (components/answer/answer_unit_rule.py), which is what their
stage's router does; as a check, the shipped by_type stage itself answers the demo's English questions and must
agree with that choice on every one (a mismatch is printed and reported).

The rule is benchmarks/defaults_loso.py's: per fold (one set held out) the candidate with the best worst case over
the other sets, of answer F1 relative to each set's best single unit (span or sentence), is applied to the held-out
set; a held-out loss beyond 2 % to its best single unit is a loss. The default changes from span only when this
procedure beats span on the worst fold; it then becomes the candidate the rule picks on every set, and the demo
runs through `run.py` before and after (answer F1 with its CI, the paired change, the diagnosis).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import hashlib
import json
import logging
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from haystack.dataclasses import GeneratedAnswer
from omegaconf import OmegaConf
from tqdm import tqdm

from benchmarks import fusion_loso
from benchmarks.common import RESULTS, ROOT, command, machine_line, report_header, run_job, write_result
from benchmarks.fusion_loso import LOSS_THRESHOLD, SetRun, relative
from components.answer.answer_unit_rule import AnswerUnitRule
from components.common.paths import cache_root
from experiments.comparison.paired_compare import compare_records
from experiments.comparison.significance import paired
from experiments.datasets import load_dataset
from experiments.evaluation.answer_metrics import F1, answer_scores
from experiments.evaluation.diagnosis import LAYERS, OK
from experiments.evaluation.question_record import QuestionRecord
from experiments.runs.config import compose, validate
from pipelines.builder import build_pipeline

CACHE_FORMAT = 1
SINGLE = ("span", "extractive")  # the single units: what a set's best single unit is the best of
BASELINE = "span"  # the offline default before this benchmark's first report (docs/results/2026-12-07-answer-unit.md)
# Label -> run.py overrides. The first, the baseline, wins ties.
CANDIDATES: dict[str, list[str]] = {
    "span": ["answer=span"],
    "extractive": ["answer=extractive"],
    "by_type": ["answer=by_type"],
    "by_type default=span": ["answer=by_type", "answer.default_unit=span"],
    "by_type sentences=2": ["answer=by_type", "answer.sentences=2"],
}
# The set the shipped by_type stage also answers, as a check (its span questions cost twice).
CHECKED = "demo-en"


@dataclass
class SetAnswers:
    """One set's questions with a reference answer, and each candidate's F1 on each of them, in order."""

    name: str
    language: str
    questions: list[str]
    f1: dict[str, list[float]]
    # by_type candidate -> the share of the questions its rule sends to the sentence unit
    sentence_share: dict[str, float]

    def mean(self, label: str) -> float:
        return sum(self.f1[label]) / len(self.f1[label])

    def best_single(self) -> float:
        return max(self.mean(label) for label in SINGLE)


# --- answers, once per set and stage --------------------------------------------------------------------------


@dataclass(frozen=True)
class Answering:
    """Where answers are cached, and llama.cpp's threads for a stage that runs a GGUF model (None: the stage's own
    setting). The span answerer's choice is greedy, so the threads change its speed, not its answers, and are not
    part of the cache key."""

    cache: Path
    threads: int | None = None

    def answers(
        self, run: SetRun, set_overrides: Sequence[str], overrides: Sequence[str]
    ) -> list[dict[str, Any]]:
        """Each question's answer (`data`, `refused`) from the answer stage `overrides` configure, given the hybrid
        retrieval's output as its context; cached by the stage's resolved config and the contexts."""
        cfg = compose(["pipeline=hybrid_rag", *set_overrides, *overrides, f"paths.cache={self.cache}"])
        spec: dict[str, Any] = OmegaConf.to_container(cfg.pipeline.answer, resolve=True)  # type: ignore[assignment]
        contexts = [[doc.id for doc in docs] for docs in run.fused]
        key = json.dumps(
            {
                "stage": spec,
                "ids": [item.id for item in run.items],
                "contexts": contexts,
                "format": CACHE_FORMAT,
            },
            sort_keys=True,
            default=str,
        )
        cached = (
            self.cache / "answer_unit" / f"{run.name}-{hashlib.sha256(key.encode()).hexdigest()[:16]}.json"
        )
        if cached.exists():
            return json.loads(cached.read_text(encoding="utf-8"))
        for component in spec["components"].values():
            if self.threads and isinstance(component, dict) and "model_kwargs" in component:
                component["model_kwargs"] = {**(component["model_kwargs"] or {}), "n_threads": self.threads}
        stage = build_pipeline(spec, key="answer", input_names=None)
        stage.warm_up()
        answers = []
        for item, context in tqdm(
            list(zip(run.items, run.fused, strict=True)), unit="q", desc=f"{run.name} {' '.join(overrides)}"
        ):
            answer = stage.answer(stage.run(question=item.question, context=list(context)))
            if answer is None:
                raise SystemExit(f"{run.name}: the stage {overrides} gave no answer to {item.id}")
            answers.append({"id": item.id, "data": answer.data, "refused": bool(answer.meta.get("refused"))})
        cached.parent.mkdir(parents=True, exist_ok=True)
        partial = cached.with_suffix(".partial")  # an interrupted run leaves no truncated cache behind
        partial.write_text(json.dumps(answers, ensure_ascii=False), encoding="utf-8")
        partial.replace(cached)
        return answers


def answer_f1(run: SetRun, answers: Sequence[Mapping[str, Any]]) -> list[float]:
    """The product's answer F1 of each answer (0 for a refusal)."""
    return [
        answer_scores(
            GeneratedAnswer(
                data=a["data"], query=item.question, documents=[], meta={"refused": a["refused"]}
            ),
            item.reference_answer,
            True,
        )[F1]
        for item, a in zip(run.items, answers, strict=True)
    ]


def unit_rule(overrides: Sequence[str]) -> tuple[AnswerUnitRule, list[str]]:
    """A by_type candidate's rule, and the overrides of the stage that gives its sentence unit (answer=extractive
    quoting as many sentences), from its composed config."""
    answer = compose(list(overrides)).answer
    rules = OmegaConf.to_container(answer.unit_rules, resolve=True)
    rule = AnswerUnitRule(rules, str(answer.default_unit))  # type: ignore[arg-type]
    return rule, ["answer=extractive", f"answer.max_sentences={int(answer.sentences)}"]


def set_answers(run: SetRun, set_overrides: Sequence[str], answering: Answering) -> SetAnswers:
    """Every candidate's F1 on the set: the single units from their own stages, by_type from its rule."""
    single = {
        label: answer_f1(run, answering.answers(run, set_overrides, CANDIDATES[label])) for label in SINGLE
    }
    f1, shares = dict(single), {}
    for label, overrides in CANDIDATES.items():
        if label in SINGLE:
            continue
        rule, sentence_stage = unit_rule(overrides)
        sentence = answer_f1(run, answering.answers(run, set_overrides, sentence_stage))
        units = [rule.classify(item.question) for item in run.items]
        f1[label] = [
            s if unit == "sentence" else p for unit, s, p in zip(units, sentence, single["span"], strict=True)
        ]
        shares[label] = units.count("sentence") / len(units)
    return SetAnswers(run.name, run.language, [item.question for item in run.items], f1, shares)


def by_type_check(run: SetRun, set_overrides: Sequence[str], answering: Answering) -> int:
    """Questions on which the shipped by_type stage's answer differs from the span or sentence answer its rule
    picks (0 when the router does what the benchmark assumes)."""
    rule, sentence_stage = unit_rule(CANDIDATES["by_type"])
    routed = answering.answers(run, set_overrides, CANDIDATES["by_type"])
    units = {
        "span": answering.answers(run, set_overrides, CANDIDATES["span"]),
        "sentence": answering.answers(run, set_overrides, sentence_stage),
    }
    return sum(
        answer != units[rule.classify(item.question)][i]
        for i, (item, answer) in enumerate(zip(run.items, routed, strict=True))
    )


def referenced_questions(set_overrides: Sequence[str], cache: Path) -> frozenset[str]:
    """The set's golden questions that have a reference answer."""
    settings = validate(compose([*set_overrides, f"paths.cache={cache}"]))
    return frozenset(
        item.question
        for item in load_dataset(settings.dataset, settings.cache).golden
        if item.reference_answer
    )


# --- leave one set out ----------------------------------------------------------------------------------------


def worst_relative(table: Mapping[str, Mapping[str, float]], label: str) -> float:
    """The worst, over the sets, of `label`'s F1 relative to the set's best single unit."""
    return min(relative(scores[label], max(scores[s] for s in SINGLE)) for scores in table.values())


def choose(table: Mapping[str, Mapping[str, float]], labels: Sequence[str]) -> str:
    """The label with the best worst case over the sets of `table` (set -> label -> mean F1), relative to each
    set's best single unit; ties go to the earlier label (the shipped default first)."""
    return max(labels, key=lambda label: (worst_relative(table, label), -labels.index(label)))


def folds(sets: Mapping[str, SetAnswers], labels: Sequence[str]) -> list[dict[str, Any]]:
    """Per held-out set: the choice on the others, its F1 there against the baseline's with the paired 95 % CI."""
    table = {name: {label: s.mean(label) for label in labels} for name, s in sets.items()}
    rows = []
    for held, answers in sets.items():
        chosen = choose({name: row for name, row in table.items() if name != held}, labels)
        change = paired(F1, answers.f1[BASELINE], answers.f1[chosen])
        rows.append(
            {
                "held_out": held,
                "chosen": chosen,
                "f1": answers.mean(chosen),
                "baseline": answers.mean(BASELINE),
                "change": change,
                "relative": relative(answers.mean(chosen), answers.best_single()),
            }
        )
    return rows


# --- the report -----------------------------------------------------------------------------------------------


def sets_section(sets: Mapping[str, SetAnswers], labels: Sequence[str]) -> list[str]:
    lines = [
        "## Answer F1 per set",
        "",
        f"Mean answer F1 over the questions with a reference answer, each relative to the set's best single unit "
        f"(span or extractive); a loss beyond {LOSS_THRESHOLD:.0%} is in bold. `sentence` is the share of the "
        "questions the by_type rule sends to the sentence unit.",
        "",
        "| set | lang | questions | "
        + " | ".join(f"`{label}`" for label in labels)
        + " | sentence (by_type) |",
        "|---|---|---|" + "---|" * (len(labels) + 1),
    ]
    for name, answers in sets.items():
        cells = []
        for label in labels:
            change = relative(answers.mean(label), answers.best_single())
            text = f"{answers.mean(label):.3f} ({change:+.1%})"
            cells.append(f"**{text}**" if change < -LOSS_THRESHOLD else text)
        lines.append(
            f"| {name} | {answers.language} | {len(answers.questions)} | "
            + " | ".join(cells)
            + f" | {answers.sentence_share['by_type']:.0%} |"
        )
    return lines


def folds_section(sets: Mapping[str, SetAnswers], labels: Sequence[str]) -> tuple[list[str], bool, str]:
    """The LOSO table and summary; whether the default changes, and to what."""
    rows = folds(sets, labels)
    lines = [
        "## Leave one set out",
        "",
        "Per held-out set: the candidate with the best worst case on the other sets, its F1 there, and its change "
        f"against `{BASELINE}` (the offline default before this report) with the paired bootstrap 95 % CI and "
        "permutation p.",
        "",
        f"| held-out set | chosen on the others | held-out F1 | {BASELINE} | change vs {BASELINE} [95 % CI] | p "
        "| vs best single |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        c = row["change"]
        loss = f"{row['relative']:+.1%}"
        lines.append(
            f"| {row['held_out']} | `{row['chosen']}` | {row['f1']:.3f} | {row['baseline']:.3f} | {c.diff:+.3f} "
            f"[{c.low:+.3f}, {c.high:+.3f}] | {c.p_value:.3f} | "
            + (f"**{loss}**" if row["relative"] < -LOSS_THRESHOLD else loss)
            + " |"
        )
    table = {name: {label: s.mean(label) for label in labels} for name, s in sets.items()}
    lines.append("")
    for label in labels:
        changes = [relative(s.mean(label), s.best_single()) for s in sets.values()]
        lines.append(
            f"- `{label}`: worst fold {min(changes):+.1%}, {sum(c < -LOSS_THRESHOLD for c in changes)} of "
            f"{len(changes)} folds lose more than {LOSS_THRESHOLD:.0%}."
        )
    loso = min(row["relative"] for row in rows)
    baseline = worst_relative(table, BASELINE)
    losses = sum(row["relative"] < -LOSS_THRESHOLD for row in rows)
    lines.append(
        f"- LOSO (worst-case rule): worst fold {loso:+.1%}, {losses} of {len(rows)} folds lose more than "
        f"{LOSS_THRESHOLD:.0%}; `{BASELINE}` alone: worst fold {baseline:+.1%}."
    )
    everywhere = choose(table, labels)
    changes = loso > baseline and everywhere != BASELINE
    lines.append(
        f"- Decision: the rule picks `{everywhere}` on every set; "
        + (
            f"the LOSO procedure beats `{BASELINE}` on the worst fold, so `{everywhere}` becomes the default."
            if changes
            else f"the LOSO procedure does not beat `{BASELINE}` on the worst fold, so the default stays it."
        )
    )
    return lines, changes, everywhere


def by_unit_section(sets: Mapping[str, SetAnswers]) -> list[str]:
    """Where the rule helps: span and sentence F1 on the questions it sends to each unit, per language."""
    rule, _ = unit_rule(CANDIDATES["by_type"])
    lines = [
        "## By question type",
        "",
        "Questions pooled per language by the unit the shipped by_type rule gives them: the mean F1 of each single "
        "unit on them.",
        "",
        "| language | unit by rule | questions | span F1 | extractive F1 |",
        "|---|---|---|---|---|",
    ]
    for language in sorted({s.language for s in sets.values()}):
        for unit in ("span", "sentence"):
            picked = [
                (s.f1["span"][i], s.f1["extractive"][i])
                for s in sets.values()
                if s.language == language
                for i, q in enumerate(s.questions)
                if rule.classify(q) == unit
            ]
            if picked:
                lines.append(
                    f"| {language} | {unit} | {len(picked)} | {sum(p for p, _ in picked) / len(picked):.3f} "
                    f"| {sum(e for _, e in picked) / len(picked):.3f} |"
                )
    return lines


def demo_section(label: str, out: Path, reuse: bool) -> list[str]:
    """`python run.py` on the demo (both languages, one index) with `span` and with `label`: the run's own answer
    F1 and CI, the paired change and the diagnosis."""
    jobs = {
        name: run_job(CANDIDATES[name], out / re.sub(r"\W+", "_", name), reuse) for name in (BASELINE, label)
    }
    records = {name: {r["id"]: QuestionRecord.from_json(r) for r in rows} for name, (_, rows) in jobs.items()}
    [change] = compare_records(records[BASELINE], records[label], [F1])
    lines = [
        "## The demo through run.py",
        "",
        f"`python run.py {' '.join(CANDIDATES[BASELINE])}` against `python run.py {' '.join(CANDIDATES[label])}`; "
        "`diagnosis/<layer>` counts the questions whose first broken layer it is.",
        "",
        "| answer | answer/f1 [95 % CI] | "
        + " | ".join(f"diagnosis/{layer}" for layer in (OK, *LAYERS))
        + " |",
        "|---|---|" + "---|" * (len(LAYERS) + 1),
    ]
    for name, (metrics, _) in jobs.items():
        counts = " | ".join(str(int(metrics.get(f"diagnosis/{layer}", 0))) for layer in (OK, *LAYERS))
        lines.append(
            f"| `{name}` | {metrics[F1]:.3f} [{metrics[f'{F1}/ci95_low']:.3f}, {metrics[f'{F1}/ci95_high']:.3f}] "
            f"| {counts} |"
        )
    lines += [
        "",
        f"- Paired change in answer F1: {change.diff:+.3f} [{change.low:+.3f}, {change.high:+.3f}], "
        f"p = {change.p_value:.3f}, {change.n} questions.",
    ]
    return lines


def answered_sets(
    known: Mapping[str, Sequence[str]], cache: Path, halueval: str, answering: Answering
) -> tuple[dict[str, SetAnswers], list[str]]:
    """Each set's answers (retrieved once, answered by every unit), and why the others were left out."""
    sets, skipped, asked = {}, [], {}
    for name, overrides in known.items():
        # Checked before retrieval: a set without reference answers, or asking an earlier set's questions again
        # (its corpus in another format), would only repeat a fold, and leak the held-out one into its training.
        questions = referenced_questions(overrides, cache)
        again = next(
            (earlier for earlier, theirs in asked.items() if questions and questions <= theirs), None
        )
        if not questions or again:
            skipped.append(f"{name} ({f'the questions of {again}' if again else 'no reference answers'})")
            continue
        asked[name] = questions
        run = fusion_loso.retrieve(name, overrides, cache, halueval, True)
        if run is None:
            skipped.append(f"{name} (its index is not cached)")
            continue
        kept = [i for i, item in enumerate(run.items) if item.reference_answer]
        run = dataclasses.replace(
            run,
            items=[run.items[i] for i in kept],
            lists=[run.lists[i] for i in kept],
            fused=[run.fused[i] for i in kept],
            pseudo={},
        )
        sets[name] = set_answers(run, overrides, answering)
        if name == CHECKED:
            mismatches = by_type_check(run, overrides, answering)
            print(f"{name}: answer=by_type differs from its rule's unit on {mismatches} questions")
            if mismatches:
                skipped.append(
                    f"WARNING {name}: the by_type stage differs from its rule's unit on {mismatches} "
                    "questions"
                )
    return sets, skipped


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sets", nargs="+", help="set names (default: every set with reference answers)")
    parser.add_argument("--halueval", choices=("auto", "yes", "no"), default="auto")
    parser.add_argument("--cache", type=Path, default=ROOT / cache_root())
    parser.add_argument("--out", type=Path, help=f"the report (default: {RESULTS}/<date>-answer-unit.md)")
    parser.add_argument(
        "--threads",
        type=int,
        help="llama.cpp threads of the span answerer (default: every core; "
        "1 is faster on a machine other jobs keep busy)",
    )
    parser.add_argument("--reuse", action="store_true", help="read the demo's run.py jobs already finished")
    args = parser.parse_args(argv)
    logging.getLogger("haystack").setLevel(logging.WARNING)
    cache = args.cache.resolve()
    answering = Answering(cache, args.threads)
    known = fusion_loso.BUILTIN_SETS | fusion_loso.doc_set_overrides(cache)
    names = args.sets or [n for n in known if n != "halueval" or args.halueval != "no"]
    sets, skipped = answered_sets({name: known[name] for name in names}, cache, args.halueval, answering)
    if len(sets) < 2:
        raise SystemExit("need at least two sets with reference answers for leave-one-set-out")
    labels = list(CANDIDATES)
    fold_lines, changes, chosen = folds_section(sets, labels)
    command_line = command(
        "benchmarks.answer_unit", argv, flags=("--reuse",), options=("--out", "--cache", "--threads")
    )
    report = [
        report_header(command_line),
        "",
        f"# The unit of the offline answer by leave-one-set-out ({datetime.date.today().isoformat()})",
        "",
        f"Written by `{command_line}`. {machine_line()} Sets: {', '.join(sets)}; left out: "
        f"{', '.join(skipped) or 'none'}. Candidates: "
        + "; ".join(f"`{label}` (`{' '.join(overrides)}`)" for label, overrides in CANDIDATES.items())
        + ".",
        "",
        *sets_section(sets, labels),
        "",
        *fold_lines,
        "",
        *by_unit_section(sets),
        "",
        *(demo_section(chosen, ROOT / "outputs" / "answer_unit", args.reuse) + [""] if changes else []),
    ]
    print("\n".join(report))
    write_result("\n".join(report), args.out, "answer-unit")
    return 0


if __name__ == "__main__":
    sys.exit(main())
