"""The semantic splitter's control flow over sentence units, with a stand-in embedder whose cuts are known in advance
(the real e5 run is tests/pipelines/test_semantic_ingest.py)."""

from dataclasses import replace
from typing import Any

import nltk
import pytest
from haystack import Document, Pipeline, component, default_from_dict, default_to_dict

from components.preprocessors.semantic_splitter import SemanticDocumentSplitter

EN = (
    "Annual leave is fifteen days. Unused leave carries over. Sick leave needs a note.\n"
    "The VPN needs a token. Reset the VPN password yearly. Guests never get VPN access."
)
ZH = "员工每年有十五天年假。病假需要医院证明。婚假为十天。公司网络需要令牌。网络密码每年更换。访客网络与办公网络隔离。"


@component
class TopicEmbedder:
    """Embeds a text by the topics it mentions: leave and network orthogonal, the office close to leave."""

    def __init__(self) -> None:
        self.progress_bar = True
        self.warmed = False

    def to_dict(self) -> dict[str, Any]:
        return default_to_dict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "TopicEmbedder":
        return default_from_dict(cls, data)

    def warm_up(self) -> None:
        self.warmed = True

    @component.output_types(documents=list[Document])
    def run(self, documents: list[Document]) -> dict[str, list[Document]]:
        def vector(text: str) -> list[float]:
            office = "office" in text.lower()
            return [
                float("leave" in text or "假" in text or office),
                float("VPN" in text or "网络" in text) + 0.2 * office,
            ]

        return {"documents": [replace(doc, embedding=vector(doc.content or "")) for doc in documents]}


@pytest.fixture(autouse=True)
def no_nltk(monkeypatch):
    """Punkt would have to be looked for and downloaded: any attempt fails the test."""

    def refuse(*args, **kwargs):
        raise AssertionError("NLTK was asked for punkt")

    monkeypatch.setattr(nltk, "download", refuse)
    monkeypatch.setattr(nltk.data, "find", refuse)
    monkeypatch.setattr(nltk.data, "load", refuse)


def split(text, **params):
    embedder = TopicEmbedder()
    splitter = SemanticDocumentSplitter(
        document_embedder=embedder, sentences_per_group=1, min_length=0, **params
    )
    splitter.warm_up()
    assert embedder.warmed and not embedder.progress_bar
    return splitter.run(documents=[Document(id="d", content=text, meta={"access": ["hr"]})])["documents"]


@pytest.mark.parametrize(
    ("text", "topic_shift"), [(EN, EN.index("The VPN")), (ZH, ZH.index("公司网络"))], ids=["en", "zh"]
)
def test_cuts_where_the_topic_shifts_and_keeps_every_character(text, topic_shift):
    chunks = split(text, max_length=1000)
    assert [c.content for c in chunks] == [text[:topic_shift], text[topic_shift:]]
    assert [c.meta["split_idx_start"] for c in chunks] == [0, topic_shift]
    assert all(c.meta["source_id"] == "d" and c.meta["access"] == ["hr"] for c in chunks)


def test_a_chunk_over_max_length_is_cut_again_at_its_own_largest_shift():
    """Only the leave-to-network shift passes the document's 90th percentile; the leave-and-office chunk, over
    max_length, is cut again at the smaller leave-to-office shift, the largest within it."""
    leave, vpn = EN.split("\n")
    office = "The office opens at eight. The office has a canteen. Office keys are at reception. "
    text = leave + " " + office + vpn
    chunks = split(text, max_length=len(leave + office))
    assert [c.content for c in chunks] == [leave + " ", office, vpn]
    assert [c.meta["split_idx_start"] for c in chunks] == [0, len(leave) + 1, len(leave + office) + 1]


def test_async_warm_up_needs_no_nltk_either():
    import asyncio

    splitter = SemanticDocumentSplitter(
        document_embedder=TopicEmbedder(), sentences_per_group=1, min_length=0
    )
    asyncio.run(splitter.warm_up_async())
    assert splitter.document_embedder.warmed and splitter.sentence_splitter is None


def test_to_dict_holds_every_init_parameter_and_from_dict_restores_them():
    splitter = SemanticDocumentSplitter(
        document_embedder=TopicEmbedder(),
        sentences_per_group=2,
        percentile=0.8,
        min_length=100,
        max_length=500,
    )
    data = splitter.to_dict()
    assert data == {
        "type": "components.preprocessors.semantic_splitter.SemanticDocumentSplitter",
        "init_parameters": {
            "document_embedder": {"type": f"{__name__}.TopicEmbedder", "init_parameters": {}},
            "sentences_per_group": 2,
            "percentile": 0.8,
            "min_length": 100,
            "max_length": 500,
        },
    }
    pipeline = Pipeline()
    pipeline.add_component("splitter", splitter)
    restored = Pipeline.loads(pipeline.dumps(), allowed_modules=["components", "tests"]).get_component(
        "splitter"
    )
    assert isinstance(restored, SemanticDocumentSplitter) and restored.to_dict() == data
