"""Questions a chat model writes from the corpus: for each sampled passage (a few consecutive sentences of one
document) it returns a question, its answer and the quote that answers it, held to a JSON schema; for some passages
it writes a question on the passage's topic that the passage does not answer.

Any Haystack chat generator serves: `models.chat` (SmolLM2 through llama.cpp offline, under a JSON grammar; the
endpoint's model with models=openai_compatible). The same filters as the offline generator's then judge every draft
(experiments/datasets/testset.py): a quote the model did not copy from the passage is not found, and the draft goes.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator, Sequence
from typing import Any

from haystack import Document
from haystack.dataclasses import ChatMessage

from components.common.sentences import split_sentences
from components.common.text import detect_language
from experiments.datasets.offline_questions import UNANSWERABLE, Draft

CATEGORIES = ("numeric", "lookup", "procedure", "comparison")
PASSAGE_SENTENCES = 3
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "question": {"type": "string", "minLength": 5, "maxLength": 200},
        "answer": {"type": "string", "minLength": 1, "maxLength": 200},
        "quote": {"type": "string", "minLength": 5, "maxLength": 400},
        "category": {"type": "string", "enum": list(CATEGORIES)},
    },
    "required": ["question", "answer", "quote", "category"],
}
UNANSWERABLE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"question": {"type": "string", "minLength": 5, "maxLength": 200}},
    "required": ["question"],
}
PROMPTS = {
    "en": ("Write one question a user of this documentation would ask, answered by the passage below. Give the "
           "short answer, the sentence of the passage that answers it, copied exactly, and the question's kind "
           "(numeric, lookup, procedure or comparison). Ask in your own words; do not copy the passage.\n\n"
           "Passage:\n{passage}"),
    "zh": ("根据下面的文档片段，写一个用户会提出的问题，答案必须在片段中。给出简短答案、原样复制的片段中回答该问题的句子，"
           "以及问题类型（numeric、lookup、procedure 或 comparison）。用自己的话提问，不要照抄片段。\n\n片段：\n{passage}"),
}
UNANSWERABLE_PROMPTS = {
    "en": ("Write one question on the topic of the passage below that the passage does NOT answer: a detail it "
           "does not give.\n\nPassage:\n{passage}"),
    "zh": "针对下面片段的主题写一个问题，但片段本身不能回答它（问片段没有给出的细节）。\n\n片段：\n{passage}",
}


class LlmQuestionWriter:
    """Drafts from a chat generator (its `run(messages=...)` returns `replies`), `passages` of them, one in
    `unanswerable_every` asking what the passage does not say."""

    def __init__(self, chat_generator: Any, unanswerable_schema_generator: Any | None = None,
                 unanswerable_every: int = 6) -> None:
        self.chat_generator = chat_generator
        self.unanswerable_generator = unanswerable_schema_generator or chat_generator
        self.unanswerable_every = unanswerable_every
        self.failed_replies = 0

    def warm_up(self) -> None:
        for generator in {id(g): g for g in (self.chat_generator, self.unanswerable_generator)}.values():
            if hasattr(generator, "warm_up"):
                generator.warm_up()

    def drafts(self, documents: Sequence[Document], passages: int, seed: int = 0) -> Iterator[Draft]:
        chosen = _passages(documents)
        random.Random(seed).shuffle(chosen)
        for number, (doc_id, passage) in enumerate(chosen[:passages]):
            language = "zh" if detect_language(passage) == "zh" else "en"
            if self.unanswerable_every and number % self.unanswerable_every == self.unanswerable_every - 1:
                reply = self._ask(self.unanswerable_generator, UNANSWERABLE_PROMPTS[language], passage)
                if reply is not None:
                    yield Draft(str(reply["question"]).strip(), None, passage, doc_id, UNANSWERABLE, language)
                continue
            reply = self._ask(self.chat_generator, PROMPTS[language], passage)
            if reply is not None:
                category = reply.get("category") if reply.get("category") in CATEGORIES else "lookup"
                yield Draft(str(reply["question"]).strip(), str(reply["answer"]).strip(), str(reply["quote"]).strip(),
                            doc_id, category, language)

    def _ask(self, generator: Any, prompt: str, passage: str) -> dict[str, Any] | None:
        replies = generator.run(messages=[ChatMessage.from_user(prompt.format(passage=passage))])["replies"]
        try:
            reply = json.loads(replies[0].text or "")
        except (json.JSONDecodeError, IndexError):
            reply = None
        if not isinstance(reply, dict) or not reply.get("question"):
            self.failed_replies += 1
            return None
        return reply


def _passages(documents: Sequence[Document]) -> list[tuple[str, str]]:
    """(doc id, passage) for each run of PASSAGE_SENTENCES sentences of each document."""
    passages = []
    for doc in documents:
        sentences = split_sentences(doc.content or "")
        glue = "" if detect_language(doc.content or "") == "zh" else " "  # as the text has it, so quotes are found
        for start in range(0, len(sentences), PASSAGE_SENTENCES):
            passage = glue.join(sentences[start:start + PASSAGE_SENTENCES])
            if len(passage) >= 40:
                passages.append((str(doc.meta.get("doc_id", doc.id)), passage))
    return passages
