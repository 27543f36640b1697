"""A bounded self-check: a generated answer with unsupported sentences goes back to the generator, then refuses."""

from __future__ import annotations

from typing import Any

from haystack import Document, component, default_from_dict, default_to_dict
from haystack.dataclasses import ChatMessage, GeneratedAnswer

from components.answer.answer_meta import uncited_meta
from components.answer.citation_verifier import CitationVerifier
from components.common.text import detect_language, refusal_for

# Marks the feedback messages this component adds, so the prompt it receives tells how many retries it has had.
RETRY_META = "selfcheck_retry"


@component
class SelfCheck:
    """
    Accepts a verified answer, or asks the generator again with feedback that names the unsupported sentences.

    It closes a loop in the answer stage: `BranchJoiner`s feed the generator the prompt (first from the prompt
    builder, then from `retry_messages`) and the verifier the context (first from upstream, then from
    `retry_documents`, because Haystack consumes a component's inputs and the loop must carry them). The count
    of retries travels in the prompt itself (feedback messages carry `meta["selfcheck_retry"]`), so the component
    keeps no state between questions. After `max_retries` retries an answer that is still unsupported becomes
    the refusal in the question's language: an "I don't know" instead of a claim its sources do not make.
    `max_retries: 0` accepts every answer as verified (the self-check is off).

    ### Usage example
    ```python
    check = SelfCheck(max_retries=1, refusals={"en": "I cannot answer."}, feedback={"en": "Unsupported: {sentences}"})
    out = check.run(answers=verified, messages=prompt, documents=context)
    out.get("answers") or out["retry_messages"]  # accepted/refused answer, or the prompt for another try
    ```
    """

    answer_meta_keys = (*CitationVerifier.answer_meta_keys, "selfcheck_retries")

    def __init__(self, max_retries: int, refusals: dict[str, str], feedback: dict[str, str]) -> None:
        """
        :param max_retries: Retries before refusing; 0 turns the self-check off.
        :param refusals: Language -> refusal sentence; must have "en", used for languages it lacks.
        :param feedback: Language -> the retry instruction; `{sentences}` lists the unsupported sentences and
            `{refusal}` is the refusal sentence. Must have "en".
        :raises ValueError: on a negative bound, or refusals/feedback without "en".
        """
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries}")
        for name, texts in (("refusals", refusals), ("feedback", feedback)):
            if "en" not in texts:
                raise ValueError(f"{name} needs an 'en' entry, got languages {sorted(texts)}")
        self.max_retries = max_retries
        self.refusals = dict(refusals)
        self.feedback = dict(feedback)

    def to_dict(self) -> dict[str, Any]:
        """Serialise the component."""
        return default_to_dict(self, max_retries=self.max_retries, refusals=self.refusals, feedback=self.feedback)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SelfCheck:
        """Deserialise the component."""
        return default_from_dict(cls, data)

    @component.output_types(
        answers=list[GeneratedAnswer], retry_messages=list[ChatMessage], retry_documents=list[Document]
    )
    def run(self, answers: list[GeneratedAnswer], messages: list[ChatMessage], documents: list[Document]) -> dict[str, Any]:
        """
        :param answers: The verifier's answer (answer contract meta).
        :param messages: The prompt the generator answered.
        :param documents: The context the verifier checked against, passed on for the retry.
        :returns: `answers` (accepted, with `selfcheck_retries`, or the refusal after the last retry), or
            `retry_messages` and `retry_documents` for another try.
        """
        answer = answers[0]
        retries = sum(1 for message in messages if RETRY_META in message.meta)
        unsupported = list(answer.meta.get("unsupported_sentences") or [])
        if not unsupported or answer.meta.get("refused") or self.max_retries == 0:
            return {"answers": [_with_meta(answer, selfcheck_retries=retries)]}
        if retries < self.max_retries:
            return {"retry_messages": self._retry_prompt(answer, messages, unsupported, retries), "retry_documents": documents}
        return {"answers": [self._refusal(answer, retries)]}

    def _retry_prompt(
        self, answer: GeneratedAnswer, messages: list[ChatMessage], unsupported: list[str], retries: int
    ) -> list[ChatMessage]:
        language = detect_language(answer.query)
        template = self.feedback.get(language, self.feedback["en"])
        listed = " ".join(f"«{sentence}»" for sentence in unsupported)
        text = template.format(sentences=listed, refusal=refusal_for(self.refusals, answer.query))
        reply = ChatMessage.from_assistant(str(answer.meta.get("raw", answer.data or "")))
        return [*messages, reply, ChatMessage.from_user(text, meta={RETRY_META: retries + 1})]

    def _refusal(self, answer: GeneratedAnswer, retries: int) -> GeneratedAnswer:
        meta = uncited_meta(refused=True) | {
            "raw": answer.meta.get("raw", ""),
            "usage": answer.meta.get("usage", {}),
            "refusal_reason": "selfcheck",
            "selfcheck_retries": retries,
            "selfcheck_rejected": answer.data,
        }
        return GeneratedAnswer(data=refusal_for(self.refusals, answer.query), query=answer.query, documents=[], meta=meta)


def _with_meta(answer: GeneratedAnswer, **extra: Any) -> GeneratedAnswer:
    return GeneratedAnswer(data=answer.data, query=answer.query, documents=answer.documents, meta={**answer.meta, **extra})
