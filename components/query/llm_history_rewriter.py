"""The LLM multi-turn rewriter: a chat model restates the latest question so that it stands on its own."""

from __future__ import annotations

from typing import Any

from haystack import component, default_to_dict, logging
from haystack.core.serialization import component_to_dict
from haystack.dataclasses import ChatMessage

from components.answer.json_reply import HoldsChatGenerator, ask_json
from components.common.text import detect_language

logger = logging.getLogger(__name__)


@component
class LLMHistoryRewriter(HoldsChatGenerator):
    """
    Asks a chat generator for `{"question": "..."}`: the latest question restated with what it takes from the chat.

    Questions without history pass untouched and cost no call. The reply must be a JSON object whose `question` is
    a non-empty string of at most `max_chars_factor` times the length of the question and its history's last user
    turn; anything else (a generator error, bad JSON, a missing key, an empty or runaway rewrite) falls back to
    the question as asked and says so in `fallback`, which evaluation counts as `query/fallbacks`. Hold the
    generator to the JSON schema (conf/rewriter/llm.yaml) and small local models reply parseably; the check stays
    for online ones.

    ### Usage example
    ```python
    rewriter = LLMHistoryRewriter(chat_generator=generator, templates={"en": "...", "zh": "..."})
    rewriter.run(question="And for part-timers?", history=[ChatMessage.from_user("How long is annual leave?")])
    # {"question": "How long is annual leave for part-timers?", "queries": [...], "fallback": False}
    ```
    """

    def __init__(
        self, chat_generator: Any, templates: dict[str, str], turns: int = 2, max_chars_factor: float = 3.0
    ) -> None:
        """
        :param chat_generator: A Haystack chat generator (`run(messages=...)` -> `replies`).
        :param templates: Language ("en", "zh") -> the user message, with `{history}` and `{question}` fields.
        :param turns: How many of the latest history messages are shown.
        :param max_chars_factor: A rewrite longer than this many times the question plus its last user turn is
            rejected (a model that runs on).
        :raises ValueError: on a template without its fields, or non-positive limits.
        """
        for language, template in templates.items():
            if "{history}" not in template or "{question}" not in template:
                raise ValueError(f"templates[{language!r}] must contain {{history}} and {{question}}")
        if turns < 1 or max_chars_factor <= 0:
            raise ValueError("turns must be >= 1 and max_chars_factor > 0")
        self.chat_generator = chat_generator
        self.templates = dict(templates)
        self.turns = turns
        self.max_chars_factor = max_chars_factor


    def to_dict(self) -> dict[str, Any]:
        """Serialise the component, the generator with its own `to_dict()`."""
        return default_to_dict(
            self,
            chat_generator=component_to_dict(self.chat_generator, "chat_generator"),
            templates=self.templates,
            turns=self.turns,
            max_chars_factor=self.max_chars_factor,
        )


    @component.output_types(question=str, queries=list[str], fallback=bool)
    def run(self, question: str, history: list[ChatMessage] | None = None) -> dict[str, Any]:
        """
        :param question: The user's latest question.
        :param history: The earlier turns of the chat, oldest first.
        :returns: `question`: the standalone query; `queries`: the rewrite when it differs from the question;
            `fallback`: the reply could not be used, so the question went on as asked.
        """
        shown = [m for m in history or [] if m.text][-self.turns :]
        if not shown:
            return {"question": question, "queries": [], "fallback": False}
        language = detect_language(question)
        template = self.templates.get(language) or next(iter(self.templates.values()))
        lines = "\n".join(f"{m.role.value}: {m.text}" for m in shown)
        prompt = template.format(history=lines, question=question)
        rewrite = self._parse(ask_json(self.chat_generator, prompt, "LLMHistoryRewriter"), question, shown)
        if rewrite is None:
            return {"question": question, "queries": [], "fallback": True}
        return {"question": rewrite, "queries": [rewrite] if rewrite != question else [], "fallback": False}

    def _parse(self, reply: dict[str, Any] | None, question: str, shown: list[ChatMessage]) -> str | None:
        rewrite = (reply or {}).get("question")
        last_user = next((m.text or "" for m in reversed(shown) if m.is_from("user")), "")
        limit = self.max_chars_factor * (len(question) + len(last_user))
        if not isinstance(rewrite, str) or not rewrite.strip() or len(rewrite) > limit:
            if reply is not None:
                logger.warning("LLMHistoryRewriter: unusable rewrite {reply!r}; the question goes on as asked", reply=reply)
            return None
        return rewrite.strip()
