"""Which layer broke first, per question: find it before fixing anything.

The layers are checked in pipeline order. A question routed where it cannot be served (a greeting that retrieved,
a question answered without retrieval; its golden `route` says) is a routing failure. An agent that looped, ran
out of budget or called other tools than the item's `tools` is an agent failure. Evidence that no single chunk of the index covers is a chunking
failure; evidence missing from the retrieval candidates is a retrieval miss; evidence among the candidates that a
retrieval evaluator (CRAG) graded incorrect is a grading miss; evidence among the candidates but not in the prompt
is a rerank or cutoff miss; evidence in the prompt with a wrong, refused or unsupported answer
is a generation failure; an unanswerable question that got an answer should have been refused (a grading miss when
the evaluator graded it correct).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from experiments.evaluation.metric_registry import Direction, Layer, declare
from experiments.evaluation.question_record import QuestionRecord
from experiments.evaluation.relevance import Judged

OK = "ok"
ROUTING = "routing"
AGENT = "agent"
CHUNKING = "chunking"
RETRIEVAL = "retrieval"
GRADING = "grading"
CONTEXT = "context"
GENERATION = "generation"
REFUSAL = "should_have_refused"
LAYERS = (ROUTING, AGENT, CHUNKING, RETRIEVAL, GRADING, CONTEXT, GENERATION, REFUSAL)
DESCRIPTIONS = {
    ROUTING: "sent where it cannot be served: a greeting or vague question retrieved, or a question answered without retrieval",
    AGENT: "the agent looped, ran out of budget, never called a tool, or called other tools than the question needs",
    CHUNKING: "evidence split across chunks: no single chunk covers it",
    RETRIEVAL: "evidence not in the retrieval candidates",
    GRADING: "the retrieval evaluator graded relevant candidates incorrect, or an unanswerable question correct",
    CONTEXT: "evidence in the candidates but cut before the prompt (rerank or cutoff)",
    GENERATION: "evidence in the prompt, but the answer is wrong, refused or unsupported",
    REFUSAL: "unanswerable, but the pipeline answered",
}
declare(
    "diagnosis/<layer>", Layer.DIAGNOSIS, Direction.NEITHER,
    f"questions whose first broken layer is `<layer>`, one of [these](#which-layer-broke); `diagnosis/{OK}`: "
    "those that passed",
)


@dataclass(frozen=True)
class Evidence:
    """Judged rankings of one question at each layer; None where the item has no locatable evidence."""

    index: Judged | None
    retrieval: Judged | None
    context: Judged | None


def complete(judged: Judged | None) -> bool:
    """Every evidence unit is covered somewhere in the ranking."""
    return judged is None or sum(judged.gains) >= judged.n_units


def first_broken_layer(
    answerable: bool,
    evidence: Evidence,
    answer: dict[str, float] | None,
    pass_f1: float,
    grade: str | None = None,
    agent_failed: bool = False,
) -> str:
    """The first failing layer of one question, or "ok". Without an answer layer, a full context passes.

    `grade` is the CRAG label of the question (None without a retrieval evaluator); `agent_failed`: the agent
    looped, ran out of budget or chose the wrong tools (experiments/evaluation/agent_metrics.agent_failure)."""
    if not answerable:
        refused = answer is None or bool(answer.get("answer/refused"))
        return OK if refused else GRADING if grade == "correct" else REFUSAL
    if answer is not None and _answer_passes(answer, pass_f1):
        return OK
    if agent_failed:
        return AGENT
    if not complete(evidence.index):
        return CHUNKING
    if not complete(evidence.retrieval):
        return RETRIEVAL
    if grade == "incorrect":
        return GRADING
    if not complete(evidence.context):
        return CONTEXT
    return OK if answer is None else GENERATION


def _answer_passes(answer: dict[str, float], pass_f1: float) -> bool:
    return (
        not answer.get("answer/refused")
        and answer.get("answer/f1", 0.0) >= pass_f1
        and answer.get("answer/unsupported_sentence_rate", 0.0) == 0.0
    )


def diagnosis_row(record: QuestionRecord) -> dict[str, Any]:
    """The columns of diagnosis.csv, from one question's record."""
    return {
        "id": record.id,
        "category": record.category,
        "answerable": bool(record.answerable),
        "layer": record.layer,
        "question": record.question,
        "reference": record.reference,
        "answer": record.answer.get("answer"),
        "f1": record.scores.get("answer/f1"),
        "refused": record.scores.get("answer/refused"),
        "unsupported_rate": record.scores.get("answer/unsupported_sentence_rate"),
        "context_recall": record.scores.get("context/recall"),
        "agent_failure": record.extras.get("agent_failure"),
    }


def layer_counts(layers: Sequence[str]) -> dict[str, float]:
    counts = Counter(layers)
    return {f"diagnosis/{layer}": float(counts.get(layer, 0)) for layer in (OK, *LAYERS)}


def diagnosis_markdown(rows: Sequence[dict[str, Any]], pipeline: str, pass_f1: float) -> str:
    """A readable summary: failures per layer, per category, then every failed question under its layer."""
    total = len(rows)
    counts = Counter(row["layer"] for row in rows)
    lines = [
        f"# Diagnosis: {pipeline}",
        "",
        f"{total} questions; {counts.get(OK, 0)} pass (answer F1 >= {pass_f1}, no unsupported sentence, "
        "or a refusal where none can be answered). Each failure is charged to the first layer that broke.",
        "",
        "| layer | failures | share | meaning |",
        "|---|---:|---:|---|",
    ]
    for layer in LAYERS:
        n = counts.get(layer, 0)
        lines.append(f"| {layer} | {n} | {n / total:.0%} | {DESCRIPTIONS[layer]} |" if total else f"| {layer} | 0 | - | |")
    categories = sorted({row["category"] for row in rows})
    lines += ["", "## Per category", "", "| category | questions | ok | " + " | ".join(LAYERS) + " |"]
    lines.append("|---|" + "---:|" * (2 + len(LAYERS)))
    for category in categories:
        in_category = Counter(row["layer"] for row in rows if row["category"] == category)
        cells = [str(in_category.get(layer, 0)) for layer in (OK, *LAYERS)]
        lines.append(f"| {category} | {sum(in_category.values())} | " + " | ".join(cells) + " |")
    for layer in LAYERS:
        failed = [row for row in rows if row["layer"] == layer]
        if not failed:
            continue
        lines += ["", f"## {layer}: {DESCRIPTIONS[layer]}", ""]
        for row in failed:
            lines.append(f"- **{row['id']}** ({row['category']}) {_cell(row['question'])}")
            lines.append(f"  - expected: {_cell(row.get('reference') or '(refusal)')}")
            lines.append(f"  - answer: {_cell(row.get('answer') or '(no answer layer)')}")
            if layer == GENERATION and row.get("answer") is not None:
                lines.append(f"  - why: {_why(row, pass_f1)}")
            if layer == AGENT:
                lines.append(f"  - why: {_cell(row['agent_failure'])}")
    return "\n".join(lines) + "\n"


def _why(row: dict[str, Any], pass_f1: float) -> str:
    reasons = []
    if row.get("refused"):
        reasons.append("refused although the evidence was in the prompt")
    elif row.get("f1") is not None and row["f1"] < pass_f1:
        reasons.append(f"token F1 {row['f1']:.2f} < {pass_f1}")
    if row.get("unsupported_rate"):
        reasons.append(f"{row['unsupported_rate']:.0%} of sentences not supported by their citations")
    return "; ".join(reasons) or "-"


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")
