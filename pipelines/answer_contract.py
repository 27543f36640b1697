"""The answer contract: what an answer component promises in `GeneratedAnswer.meta`, for evaluation and serving.

Required keys, checked when the pipeline is built (the component declares them) and on every answer:
- `refused` (bool): the answer declines to answer ("I don't know"); refusal metrics read only this.
- `citations` (list of dicts): one per cited context chunk, `{"marker", "chunk_id", "doc_id", "start", "end"}`.
- `unsupported_sentences` (list of str): answer sentences that their citations do not support.

Optional keys, scored when present: `sentences` (per sentence `{"text", "citations", "support", "supported"}`),
`invalid_citations` (markers of chunks that were not in the context) and `usage` (token counts; `llm_calls` from a
component that calls a model outside a Haystack chat generator, which evaluation cannot trace).

A component declares the contract with a class attribute `answer_meta_keys` that lists at least the required keys;
`components.answer.citation_verifier.CitationVerifier` does, so any generator or answerer followed by it conforms.
"""

from __future__ import annotations

from typing import Any

from haystack.dataclasses import GeneratedAnswer

from pipelines.errors import UserError

REQUIRED_KEYS = ("refused", "citations", "unsupported_sentences")
_TYPES = {"refused": bool, "citations": list, "unsupported_sentences": list}
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
        f"expected {_TYPES[key].__name__})"
        for key in REQUIRED_KEYS
        if not isinstance(answer.meta.get(key), _TYPES[key])
    ]
    if wrong:
        raise AnswerContractError(
            f"answer component '{component}' broke the answer contract (pipelines/answer_contract.py): "
            f"meta {', '.join(wrong)}"
        )
    return answer
