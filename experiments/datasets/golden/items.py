"""A golden question as a record: what `golden.jsonl` says of it, and where its evidence quotes were found.

`"status": "candidate"` marks an item nobody has reviewed yet (`ragtune harvest` writes them from production
failures); absent or `"reviewed"`, it is reviewed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from pipelines.errors import UserError

_WHITESPACE = re.compile(r"\s+")
# A table row an answer comes from, as the agent's sql_query tool cites it: sql:<table>/<primary key>.
ROW_ID = re.compile(r"sql:[A-Za-z_][A-Za-z0-9_]*/\S+")
CANDIDATE, REVIEWED = "candidate", "reviewed"


@dataclass(frozen=True)
class EvidenceSpan:
    """One location of a quote: half-open [start, end) in the canonical text of `doc_id`."""

    doc_id: str
    start: int
    end: int


@dataclass(frozen=True)
class GoldenItem:
    """One golden question; `evidence_spans[i]` holds every location of `evidence[i]` once located.

    `answerable=None` means "derive it": true when evidence, relevant_doc_ids or reference_answer is non-empty.
    """

    id: str
    question: str
    reference_answer: str | None = None
    evidence: tuple[str, ...] = ()
    source: str | None = None
    relevant_doc_ids: tuple[str, ...] = ()
    category: str | None = None
    # Earlier chat turns, {"role": "user" | "assistant", "content": ...}; the question is the next user turn.
    history: tuple[dict, ...] = ()
    # A Haystack metadata filter the retrievers apply for this question (e.g. a tenant or a product line).
    filters: dict | None = None
    answerable: bool | None = None
    # The route an adaptive pipeline should take (components.routers.routes.ROUTES); scored as router/accuracy.
    route: str | None = None
    # Table rows the answer comes from (sql:<table>/<key>): evidence units next to the quotes, for pipeline=agentic.
    rows: tuple[str, ...] = ()
    # The tools an agent should call, in order (kb_search, sql_query); scored as agent/tool_choice_accuracy.
    tools: tuple[str, ...] = ()
    # `"status": "candidate"`: not reviewed yet, skipped unless the loader includes candidates.
    candidate: bool = False
    evidence_spans: tuple[tuple[EvidenceSpan, ...], ...] = ()
    extra: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.answerable is None:
            derived = bool(self.evidence or self.relevant_doc_ids or self.rows or self.reference_answer)
            object.__setattr__(self, "answerable", derived)


class GoldenError(UserError, ValueError):
    """Every problem of a golden set, one per line, each naming file:line and id."""

    def __init__(self, origin: str, problems: Sequence[str]) -> None:
        self.problems = tuple(problems)
        super().__init__(
            f"golden set {origin}: {len(self.problems)} problem(s)\n"
            + "\n".join(f"  {p}" for p in self.problems)
        )


def normalise_whitespace(text: str) -> str:
    """Every run of whitespace becomes one space, ends stripped: the form quotes are matched in."""
    return _WHITESPACE.sub(" ", text).strip()
