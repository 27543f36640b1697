"""The cheapest router: keyword and pattern lists per language, kept in YAML."""

from __future__ import annotations

from typing import Any

from haystack import component, default_from_dict, default_to_dict

from components.common.patterns import compile_patterns
from components.routers.routes import RouteDecision, check_route


@component
class RulesRouter:
    """
    Picks the route of the first rule with a pattern that matches the question (case-insensitive `re.search`).

    Rules are meant to be precise, not complete: a match is certain (confidence 1), and a question no rule matches
    gets `default` with confidence 0, so a cascade asks the next router. Every language's patterns are tried:
    a pattern only matches its own script, and a Chinese question may still say "vs".

    ### Usage example
    ```python
    router = RulesRouter(rules=[{"route": "decompose", "patterns": {"en": [r"\\bcompare\\b"], "zh": ["比较"]}}])
    router.run(query="比较年假和病假")["route"]  # "decompose"
    ```
    """

    def __init__(self, rules: list[dict[str, Any]], default: str = "single_step") -> None:
        """
        :param rules: In order, `{"route": ..., "patterns": {language: [regex, ...]}}`; the first match wins.
        :param default: The route (at confidence 0) of a question no rule matches.
        :raises ValueError: naming the rule with an unknown route or a pattern that does not compile.
        """
        self.rules = [dict(rule) for rule in rules]
        self.default = check_route(default, "default")
        self._compiled = [
            (
                check_route(rule.get("route", ""), f"rules[{i}].route"),
                compile_patterns(rule.get("patterns"), f"rules[{i}].patterns"),
            )
            for i, rule in enumerate(self.rules)
        ]

    def to_dict(self) -> dict[str, Any]:
        """Serialise the component."""
        return default_to_dict(self, rules=self.rules, default=self.default)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RulesRouter:
        """Deserialise the component."""
        return default_from_dict(cls, data)

    def classify(self, query: str) -> RouteDecision:
        for route, patterns in self._compiled:
            if any(pattern.search(query) for pattern in patterns):
                return RouteDecision(route, 1.0, "rules")
        return RouteDecision(self.default, 0.0, "rules")

    @component.output_types(route=str, confidence=float, router=str, query=str)
    def run(self, query: str) -> dict[str, Any]:
        """
        :param query: The question.
        :returns: `route`, `confidence` (1 on a match, else 0), `router` ("rules") and the `query`.
        """
        return self.classify(query).outputs(query)
