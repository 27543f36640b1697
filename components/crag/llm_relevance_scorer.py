"""CRAG's grader as a small local LLM's yes/no: the probability it gives "yes, the passage answers the question"."""

from __future__ import annotations

from typing import Any

from haystack import Document, component, default_from_dict, default_to_dict
from jinja2 import Template

from components.answer.constrained_choice import load_gguf, option_probabilities


@component
class LLMRelevanceScorer:
    """
    Scores each passage by a llama.cpp model's probability of " yes" against " no" after a few-shot completion
    prompt (a base model such as Gemma-3-270M needs no chat template). Its `run()` is a ranker's, so it fills the
    `crag/scorer` slot of components.crag.crag_evaluator.CRAGEvaluator; the score is a probability in [0, 1], on which
    `ragtune calibrate crag/scorer=llm` fits the thresholds.

    ### Usage example
    ```python
    scorer = LLMRelevanceScorer(model="/models/gemma.gguf", template="Passage: {{ passage }} ... answer the question?")
    scorer.warm_up()
    scorer.run(query="When does it close?", documents=docs)["documents"][0].score  # 0.93
    ```
    """

    def __init__(
        self, model: str, template: str, top_k: int | None = None, max_passage_chars: int = 800,
        n_ctx: int = 2048, model_kwargs: dict[str, Any] | None = None,
    ) -> None:
        """
        :param model: Path of the GGUF file.
        :param template: Jinja completion prompt with `passage` and `query`, ending where " yes" or " no" follows.
        :param top_k: Passages returned, best first (None: all).
        :param max_passage_chars: Longer passages are cut, so the prompt stays within `n_ctx`.
        :param n_ctx: llama.cpp context window.
        :param model_kwargs: More `llama_cpp.Llama` arguments (e.g. seed).
        """
        self.model = model
        self.template = template
        self.top_k = top_k
        self.max_passage_chars = max_passage_chars
        self.n_ctx = n_ctx
        self.model_kwargs = dict(model_kwargs or {})
        self._prompt = Template(template)
        self._llm: Any = None

    def to_dict(self) -> dict[str, Any]:
        """Serialise the component."""
        return default_to_dict(
            self, model=self.model, template=self.template, top_k=self.top_k,
            max_passage_chars=self.max_passage_chars, n_ctx=self.n_ctx, model_kwargs=self.model_kwargs,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LLMRelevanceScorer:
        """Deserialise the component."""
        return default_from_dict(cls, data)

    def warm_up(self) -> None:
        """Loads the GGUF model once."""
        if self._llm is None:
            self._llm = load_gguf(self.model, self.n_ctx, self.model_kwargs)

    @component.output_types(documents=list[Document])
    def run(self, query: str, documents: list[Document], top_k: int | None = None) -> dict[str, list[Document]]:
        """
        :param query: The question.
        :param documents: The passages to grade.
        :param top_k: Overrides the init `top_k`.
        :returns: `documents`: copies with `score` = P(yes), best first.
        """
        if self._llm is None:
            raise RuntimeError("LLMRelevanceScorer: call warm_up() before run()")
        scored = [
            Document.from_dict(doc.to_dict() | {"score": self.probability(query, doc.content or "")}) for doc in documents
        ]
        scored.sort(key=lambda d: d.score or 0.0, reverse=True)
        limit = top_k if top_k is not None else self.top_k
        return {"documents": scored if limit is None else scored[:limit]}

    def probability(self, query: str, passage: str) -> float:
        prompt = self._prompt.render(query=query.strip(), passage=passage.strip()[: self.max_passage_chars])
        return option_probabilities(self._llm, prompt, ("yes", "no"))["yes"]
