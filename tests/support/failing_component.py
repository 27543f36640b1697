"""A reranker-slot component that raises on its third question: a bug mid-evaluation, for run.py's tests."""

from haystack import Document, component


@component
class FailsOnThirdQuestion:
    def __init__(self) -> None:
        self.calls = 0

    @component.output_types(documents=list[Document])
    def run(self, query: str, documents: list[Document]) -> dict[str, list[Document]]:
        self.calls += 1
        if self.calls == 3:
            raise RuntimeError("reranker bug on the third question")
        return {"documents": documents}
