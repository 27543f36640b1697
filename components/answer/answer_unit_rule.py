"""Which unit answers a question, a quoted span or a quoted sentence, decided by pattern rules on its wording."""

from __future__ import annotations

from typing import Any

from haystack import component, default_from_dict, default_to_dict

from components.common.patterns import compile_patterns

# span: a few words picked by the span answerer (a factoid: who, when, how many); sentence: the best context
# sentence quoted whole (how, why, a difference), whose reference is a sentence too.
UNITS = ("span", "sentence")


@component
class AnswerUnitRule:
    """
    Names the answer unit a question needs: the first rule with a pattern that matches it (case-insensitive
    `re.search`) decides, and a question no rule matches gets `default`.

    The span answerer returns a two- or three-word quote; asked how or why, it scores near zero against a
    reference that is a sentence, which the extractive answerer quotes whole. Haystack's ConditionalRouter then
    sends the question to the answerer of its unit (conf/answer/by_type.yaml); this component only classifies.

    ### Usage example
    ```python
    rule = AnswerUnitRule(rules=[{"unit": "sentence", "patterns": {"en": [r"\\bwhy\\b"], "zh": ["为什么"]}}])
    rule.run(query="为什么要签名？")["unit"]  # "sentence"
    ```
    """

    def __init__(self, rules: list[dict[str, Any]], default: str = "span") -> None:
        """
        :param rules: In order, `{"unit": "span" | "sentence", "patterns": {language: [regex, ...]}}`; every
            language's patterns are tried, since a pattern only matches its own script.
        :param default: The unit of a question no rule matches.
        :raises ValueError: naming the rule with an unknown unit or a pattern that does not compile.
        """
        self.rules = [dict(rule) for rule in rules]
        self.default = _check_unit(default, "default")
        self._compiled = [
            (
                _check_unit(rule.get("unit", ""), f"rules[{i}].unit"),
                compile_patterns(rule.get("patterns"), f"rules[{i}].patterns"),
            )
            for i, rule in enumerate(self.rules)
        ]

    def to_dict(self) -> dict[str, Any]:
        """Serialise the component."""
        return default_to_dict(self, rules=self.rules, default=self.default)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AnswerUnitRule:
        """Deserialise the component."""
        return default_from_dict(cls, data)

    def classify(self, query: str) -> str:
        """The unit of the first rule that matches `query`, else the default."""
        for unit, patterns in self._compiled:
            if any(pattern.search(query) for pattern in patterns):
                return unit
        return self.default

    @component.output_types(unit=str, query=str)
    def run(self, query: str) -> dict[str, str]:
        """
        :param query: The question.
        :returns: `unit` ("span" or "sentence") and the `query`, for the router that follows.
        """
        return {"unit": self.classify(query), "query": query}


def _check_unit(unit: str, where: str) -> str:
    if unit not in UNITS:
        raise ValueError(f"{where}: unknown unit {unit!r}; units: {', '.join(UNITS)}")
    return unit
