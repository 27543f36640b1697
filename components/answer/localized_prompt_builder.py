"""Pick the chat prompt template in the question's language, so the model is told to answer in that language."""

from __future__ import annotations

from typing import Any

from haystack import Document, component, default_from_dict, default_to_dict
from haystack.components.builders import ChatPromptBuilder
from haystack.dataclasses import ChatMessage

from components.common.text import detect_language


@component
class LocalizedChatPromptBuilder:
    """
    One Haystack `ChatPromptBuilder` per language; the question's detected language picks which one runs.

    Templates are Jinja chat templates (`{% message role="system" %}...{% endmessage %}`) and receive `query`,
    `documents` and `refusal` (the sentence the model must say when the documents do not answer).

    ### Usage example
    ```python
    builder = LocalizedChatPromptBuilder(templates={"en": EN, "zh": ZH}, refusals={"en": "...", "zh": "..."})
    builder.run(query="年假有几天？", documents=docs)  # {"prompt": [...zh messages...], "language": "zh"}
    ```
    """

    def __init__(self, templates: dict[str, str], refusals: dict[str, str], default_language: str = "en") -> None:
        """
        :param templates: Language code -> chat template.
        :param refusals: Language code -> refusal sentence, passed to the template as `refusal`.
        :param default_language: Used for a detected language that has no template.
        :raises ValueError: when the default language has no template or a language has no refusal sentence.
        """
        if default_language not in templates:
            raise ValueError(f"default_language {default_language!r} has no template; templates: {sorted(templates)}")
        missing = sorted(set(templates) - set(refusals))
        if missing:
            raise ValueError(f"refusals is missing the language(s) {missing} that have templates")
        self.templates = dict(templates)
        self.refusals = dict(refusals)
        self.default_language = default_language
        self._builders = {
            language: ChatPromptBuilder(template=template, required_variables=["query", "documents"])
            for language, template in templates.items()
        }

    def to_dict(self) -> dict[str, Any]:
        """Serialise the component."""
        return default_to_dict(
            self, templates=self.templates, refusals=self.refusals, default_language=self.default_language
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LocalizedChatPromptBuilder:
        """Deserialise the component."""
        return default_from_dict(cls, data)

    def language_of(self, query: str) -> str:
        """The template language for a question: its detected language, or the default when there is no template."""
        language = detect_language(query)
        return language if language in self.templates else self.default_language

    @component.output_types(prompt=list[ChatMessage], language=str)
    def run(self, query: str, documents: list[Document]) -> dict[str, Any]:
        """
        :param query: The user's question.
        :param documents: The context, in prompt order; templates number them [1], [2], ...
        :returns: `prompt`: the chat messages; `language`: the template language used.
        """
        language = self.language_of(query)
        built = self._builders[language].run(
            query=query, documents=documents, template_variables={"refusal": self.refusals[language]}
        )
        return {"prompt": built["prompt"], "language": language}
