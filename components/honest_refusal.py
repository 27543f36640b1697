"""An honest "I don't know" as a full answer, for branches that decide not to answer (CRAG's incorrect action)."""

from __future__ import annotations

from typing import Any

from haystack import component, default_from_dict, default_to_dict
from haystack.dataclasses import GeneratedAnswer

from components.text import refusal_for


@component
class HonestRefusal:
    """
    Answers with the configured refusal sentence in the question's language, without calling a model.

    It keeps the answer contract (experiments/answer_contract.py) like `CitationVerifier`, so evaluation and
    serving read its answer as they read the answer stage's: refused, nothing cited, nothing unsupported.

    ### Usage example
    ```python
    refusal = HonestRefusal(refusals={"en": "I cannot answer this from the provided documents.", "zh": "无法回答。"})
    refusal.run(query="公司有健身房吗？")["answers"][0].data  # "无法回答。"
    ```
    """

    answer_meta_keys = ("refused", "citations", "unsupported_sentences", "sentences", "invalid_citations")

    def __init__(self, refusals: dict[str, str], reason: str = "crag_incorrect") -> None:
        """
        :param refusals: Language -> refusal sentence; must have "en", used for languages it lacks.
        :param reason: Kept in the answer's meta (`refusal_reason`), so a served answer says why it refused.
        """
        if "en" not in refusals:
            raise ValueError(f"refusals needs an 'en' sentence, got languages {sorted(refusals)}")
        self.refusals = dict(refusals)
        self.reason = reason

    def to_dict(self) -> dict[str, Any]:
        """Serialise the component."""
        return default_to_dict(self, refusals=self.refusals, reason=self.reason)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> HonestRefusal:
        """Deserialise the component."""
        return default_from_dict(cls, data)

    @component.output_types(answers=list[GeneratedAnswer])
    def run(self, query: str) -> dict[str, list[GeneratedAnswer]]:
        """
        :param query: The question, kept on the answer; its language picks the sentence.
        :returns: `answers`: one refused GeneratedAnswer.
        """
        text = refusal_for(self.refusals, query)
        meta = {"refused": True, "citations": [], "unsupported_sentences": [], "sentences": [],
                "invalid_citations": [], "refusal_reason": self.reason}
        return {"answers": [GeneratedAnswer(data=text, query=query, documents=[], meta=meta)]}
