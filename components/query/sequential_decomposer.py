"""Sequential decomposition: one look-up at a time, each formed with what the previous ones found."""

from __future__ import annotations

from typing import Any

from haystack import Document, component, default_to_dict, logging
from haystack.core.serialization import component_to_dict
from haystack.utils import deserialize_chatgenerator_inplace

from components.answer.json_reply import ask_json
from components.common.text import detect_language
from components.common.wrapped import wrapped_init_parameters
from components.query.history_rewriter import shared_terms

logger = logging.getLogger(__name__)
TEMPLATE_FIELDS = ("{question}", "{facts}", "{passages}")
PASSAGE_CHARS = 400  # of each retrieved chunk shown to the model: three fit a small model's window


@component
class SequentialDecomposer:
    """
    Plans the look-ups of a multi-hop question one at a time: the model names the first simple question to look
    up; `retriever` (a text retriever over the same index) finds passages for it; the model reads them, states
    what they answer and names the next look-up, now able to use that answer ("Who signs it?" after "What does
    it cost?"), until it says the facts are enough or `max_hops` look-ups are done. A look-up that shares no
    content word with the question or the answers found ends the planning too: small models run on ("yes", "…").

    The sub-questions, then the question, come out as `queries`, for the pipeline's own retrieval paths to run
    once each (`queries_from`), as for the parallel `decompose`. Each reply must be a JSON object
    `{"answer": ..., "next": ...}` (hold the generator to the schema, conf/rewriter/decompose_sequential.yaml);
    an unusable one ends the planning with the look-ups found so far, and with none of them, `fallback` says the
    question went on alone. At most `max_hops` + 1 LLM calls per question.

    ### Usage example
    ```python
    planner = SequentialDecomposer(chat_generator=generator, retriever=BM25sRetriever(store, top_k=3),
                                   templates={"en": "...{question}...{facts}...{passages}..."})
    planner.run(query="Who signs off a two-year contract worth $30,000?")
    # {"queries": ["What approval does a $30,000 contract need?", ..., "Who signs off ...?"], "facts": [...], ...}
    ```
    """

    def __init__(self, chat_generator: Any, retriever: Any, templates: dict[str, str], max_hops: int = 3) -> None:
        """
        :param chat_generator: A Haystack chat generator (`run(messages=...)` -> `replies`).
        :param retriever: A text retriever (`run(query=..., filters=...)` -> `documents`) whose passages the
            model reads between look-ups; its `top_k` says how many.
        :param templates: Language ("en", "zh") -> the user message, with `{question}`, `{facts}` and
            `{passages}` fields.
        :param max_hops: The most look-ups per question (>= 1).
        :raises ValueError: on a template without its fields, or `max_hops` < 1.
        """
        for language, template in templates.items():
            missing = [f for f in TEMPLATE_FIELDS if f not in template]
            if missing:
                raise ValueError(f"templates[{language!r}] must contain {missing}")
        if max_hops < 1:
            raise ValueError(f"max_hops must be >= 1, got {max_hops}")
        self.chat_generator = chat_generator
        self.retriever = retriever
        self.templates = dict(templates)
        self.max_hops = max_hops

    def warm_up(self) -> None:
        """Load the model and the retriever's index."""
        for part in (self.chat_generator, self.retriever):
            if hasattr(part, "warm_up"):
                part.warm_up()

    def to_dict(self) -> dict[str, Any]:
        """Serialise the component, the generator and the retriever with their own `to_dict()`."""
        return default_to_dict(
            self,
            chat_generator=component_to_dict(self.chat_generator, "chat_generator"),
            retriever=component_to_dict(self.retriever, "retriever"),
            templates=self.templates,
            max_hops=self.max_hops,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SequentialDecomposer:
        """Deserialise the component, rebuilding the generator and the retriever from their types."""
        params = wrapped_init_parameters(data, "retriever")
        deserialize_chatgenerator_inplace(params)
        return cls(**params)

    @component.output_types(queries=list[str], facts=list[str], fallback=bool)
    def run(self, query: str, filters: dict[str, Any] | None = None) -> dict[str, Any]:
        """
        :param query: The question.
        :param filters: Haystack metadata filters for the look-ups (the pipeline's own, e.g. a tenant's).
        :returns: `queries`: the look-ups in order, then the question; `facts`: what each look-up found, as the
            model stated it; `fallback`: no look-up could be planned, so the question went on alone.
        """
        template = self.templates.get(detect_language(query)) or next(iter(self.templates.values()))
        lookups: list[str] = []
        facts: list[str] = []
        answers: list[str] = []
        passages: list[Document] = []
        for _ in range(self.max_hops + 1):
            reply = ask_json(self.chat_generator, self._prompt(template, query, facts, passages), "SequentialDecomposer")
            if reply is None:
                break
            answer, after = (str(reply.get(key) or "").strip() for key in ("answer", "next"))
            if lookups and answer:
                facts.append(f"{lookups[-1]} {answer}")
                answers.append(answer)
            related = any(shared_terms(after, text) for text in [query, *answers])
            if after in {"", query, *lookups} or len(lookups) == self.max_hops or not related:
                break
            lookups.append(after)
            passages = self.retriever.run(query=after, filters=filters)["documents"]
        return {"queries": [*lookups, query], "facts": facts, "fallback": not lookups}

    @staticmethod
    def _prompt(template: str, question: str, facts: list[str], passages: list[Document]) -> str:
        shown = "\n".join(f"- {(doc.content or '')[:PASSAGE_CHARS]}" for doc in passages) or "-"
        return template.format(question=question, facts="\n".join(f"- {f}" for f in facts) or "-", passages=shown)

