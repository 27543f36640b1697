"""The answer contract, checked: what an answer component promises in `GeneratedAnswer.meta`, for evaluation and
serving. The keys and their types are `components.answer.answer_meta.AnswerMeta`, which the components build; the
required ones (`refused`, `citations`, `unsupported_sentences`) are checked when the pipeline is built (the component
declares them) and on every answer.

A component declares the contract with a class attribute `answer_meta_keys` that lists at least the required keys;
`components.answer.citation_verifier.CitationVerifier` does, so any generator or answerer followed by it conforms.
"""

from __future__ import annotations

from typing import Any

from haystack.dataclasses import GeneratedAnswer

from components.answer.answer_meta import REQUIRED_KEYS, REQUIRED_TYPES
from pipelines.errors import UserError

DECLARATION = "answer_meta_keys"


class AnswerContractError(UserError, ValueError):
    """An answer component that does not (or no longer) fill the documented answer meta."""


def missing_declaration(instance: Any) -> list[str]:
    """The required keys a component does not declare in `answer_meta_keys` (all of them when it declares none)."""
    declared = set(getattr(type(instance), DECLARATION, ()) or ())
    return [key for key in REQUIRED_KEYS if key not in declared]


def check_answer(answer: Any, component: str) -> GeneratedAnswer:
    """Returns `answer` when it keeps the contract, else raises naming the component and the keys at fault."""
    if not isinstance(answer, GeneratedAnswer):
        raise AnswerContractError(f"answer component '{component}' gave {type(answer).__name__}, not a GeneratedAnswer")
    wrong = [
        f"{key} (missing)" if key not in answer.meta else f"{key} ({type(answer.meta[key]).__name__}, "
        f"expected {REQUIRED_TYPES[key].__name__})"
        for key in REQUIRED_KEYS
        if not isinstance(answer.meta.get(key), REQUIRED_TYPES[key])
    ]
    if wrong:
        raise AnswerContractError(
            f"answer component '{component}' broke the answer contract (pipelines/answer_contract.py): "
            f"meta {', '.join(wrong)}"
        )
    return answer


def answer_fields(answer: GeneratedAnswer) -> dict[str, Any]:
    """What a question's answer record holds, in a run's per_question.jsonl and in a served reply alike."""
    return {
        "answer": answer.data,
        "refused": bool(answer.meta.get("refused")),
        "citations": answer.meta.get("citations", []),
        "unsupported_sentences": answer.meta.get("unsupported_sentences", []),
    }
