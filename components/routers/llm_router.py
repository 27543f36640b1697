"""The heaviest router: a chat model names the route, held to the route names by a JSON schema."""

from __future__ import annotations

from typing import Any

from haystack import component, default_to_dict
from haystack.core.serialization import component_to_dict

from components.answer.json_reply import HoldsChatGenerator, ask_json
from components.common.text import detect_language
from components.routers.routes import ROUTES, RouteDecision, check_route


@component
class LLMRouter(HoldsChatGenerator):
    """
    Asks the chat model for `{"route": ...}` with a prompt in the question's language.

    Its generator comes from `pipelines.chat_models.json_chat_generator` with an `enum` of the routes, so a local
    model under llama.cpp's grammar (or an online one with `response_format`) can only name a route. A failed
    call or an unusable reply gives `fallback` at confidence 0, so the run goes on and a cascade takes the
    heavier route.

    ### Usage example
    ```python
    router = LLMRouter(chat_generator=json_chat_generator(model, schema), templates={"en": "... {question}"})
    router.run(query="hello!")["route"]  # "no_retrieval"
    ```
    """

    def __init__(self, chat_generator: Any, templates: dict[str, str], fallback: str = "multi_step") -> None:
        """
        :param chat_generator: A Haystack chat generator whose replies are JSON objects with a `route` key.
        :param templates: Language -> prompt with `{question}` ("en" is the fallback); literal braces doubled.
        :param fallback: The route of a question the model could not route.
        :raises ValueError: on templates without "en" or an unknown fallback route.
        """
        if "en" not in templates:
            raise ValueError(f"templates need an 'en' prompt, got languages {sorted(templates)}")
        self.chat_generator = chat_generator
        self.templates = dict(templates)
        self.fallback = check_route(fallback, "fallback")


    def to_dict(self) -> dict[str, Any]:
        """Serialise the component, with its chat generator."""
        return default_to_dict(
            self,
            chat_generator=component_to_dict(self.chat_generator, "chat_generator"),
            templates=self.templates,
            fallback=self.fallback,
        )


    def classify(self, query: str) -> RouteDecision:
        template = self.templates.get(detect_language(query), self.templates["en"])
        reply = ask_json(self.chat_generator, template.format(question=query), "LLMRouter")
        route = (reply or {}).get("route")
        if route in ROUTES:
            return RouteDecision(str(route), 1.0, "llm")
        return RouteDecision(self.fallback, 0.0, "llm")

    @component.output_types(route=str, confidence=float, router=str, query=str)
    def run(self, query: str) -> dict[str, Any]:
        """
        :param query: The question.
        :returns: `route`, `confidence` (1, or 0 for the fallback), `router` ("llm") and the `query`.
        """
        return self.classify(query).outputs(query)
