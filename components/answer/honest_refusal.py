"""An honest "I don't know" as a full answer, for branches that decide not to answer (CRAG's incorrect action)."""

from __future__ import annotations

from typing import Any

from haystack import component, default_from_dict, default_to_dict

from components.answer.fixed_reply import FixedReply


@component
class HonestRefusal(FixedReply):
    """
    A `FixedReply` that refuses: the configured refusal sentence in the question's language, no model call.

    ### Usage example
    ```python
    refusal = HonestRefusal(refusals={"en": "I cannot answer this from the provided documents.", "zh": "无法回答。"})
    refusal.run(query="公司有健身房吗？")["answers"][0].data  # "无法回答。"
    ```
    """

    def __init__(self, refusals: dict[str, str], reason: str = "crag_incorrect") -> None:
        """
        :param refusals: Language -> refusal sentence; must have "en", used for languages it lacks.
        :param reason: Kept in the answer's meta (`refusal_reason`), so a served answer says why it refused.
        """
        FixedReply.__init__(self, replies=refusals, refused=True, reason=reason)  # @component rebuilds the class: no super()
        self.refusals = self.replies

    def to_dict(self) -> dict[str, Any]:
        """Serialise the component."""
        return default_to_dict(self, refusals=self.refusals, reason=self.reason)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> HonestRefusal:
        """Deserialise the component."""
        return default_from_dict(cls, data)
