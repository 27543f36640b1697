"""A configured reply as a full answer, for branches that answer without retrieval or a model."""

from __future__ import annotations

from typing import Any

from haystack import component, default_from_dict, default_to_dict
from haystack.dataclasses import GeneratedAnswer

from components.answer.answer_meta import uncited_meta
from components.common.text import refusal_for


@component
class FixedReply:
    """
    Answers with the configured text in the question's language: a greeting's reply, a clarifying question, or
    an honest refusal (`refused=True`, CRAG's incorrect action).

    It keeps the answer contract (pipelines/answer_contract.py) like `CitationVerifier`, so evaluation and
    serving read its answer as they read the answer stage's: nothing cited, nothing unsupported. `{question}` in
    a reply is replaced by the question.

    ### Usage example
    ```python
    clarify = FixedReply(replies={"en": "Which policy do you mean by “{question}”?", "zh": "您指的是哪项制度？"})
    clarify.run(query="What's the limit?")["answers"][0].data  # "Which policy do you mean by “What's the limit?”?"
    ```
    """

    answer_meta_keys = ("refused", "citations", "unsupported_sentences", "sentences", "invalid_citations")

    def __init__(self, replies: dict[str, str], refused: bool = False, reason: str = "fixed_reply") -> None:
        """
        :param replies: Language -> reply; must have "en", used for languages it lacks.
        :param refused: Whether the reply declines to answer (refusal metrics read it).
        :param reason: Kept in the answer's meta (`refusal_reason`, else `reply_reason`): why this branch answered.
        """
        if "en" not in replies:
            raise ValueError(f"replies need an 'en' sentence, got languages {sorted(replies)}")
        self.replies = dict(replies)
        self.refused = refused
        self.reason = reason

    def to_dict(self) -> dict[str, Any]:
        """Serialise the component."""
        return default_to_dict(self, replies=self.replies, refused=self.refused, reason=self.reason)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FixedReply:
        """Deserialise the component."""
        return default_from_dict(cls, data)

    @component.output_types(answers=list[GeneratedAnswer])
    def run(self, query: str) -> dict[str, list[GeneratedAnswer]]:
        """
        :param query: The question, kept on the answer; its language picks the reply.
        :returns: `answers`: one GeneratedAnswer.
        """
        text = refusal_for(self.replies, query).replace("{question}", query.strip())
        meta = uncited_meta(self.refused) | {("refusal_reason" if self.refused else "reply_reason"): self.reason}
        return {"answers": [GeneratedAnswer(data=text, query=query, documents=[], meta=meta)]}
