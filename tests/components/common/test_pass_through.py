from typing import Any

import pytest
from haystack import Document, Pipeline
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.document_stores.in_memory import InMemoryDocumentStore
from haystack.utils.type_serialization import serialize_type

from components.common.pass_through import PassThrough
from pipelines.haystack_compat import input_sockets, output_sockets

DOCUMENTS = serialize_type(list[Document])


def _store() -> InMemoryDocumentStore:
    store = InMemoryDocumentStore()
    store.write_documents(
        [
            Document(id="1", content="apple pie"),
            Document(id="2", content="apple tart"),
            Document(id="3", content="x"),
        ]
    )
    return store


def test_sockets_mirror_the_declared_types():
    skip = PassThrough(sockets={"documents": DOCUMENTS, "query": "str", "anything": serialize_type(Any)})
    inputs = input_sockets(skip)
    outputs = output_sockets(skip)
    assert inputs["documents"].type == outputs["documents"].type == list[Document]
    assert inputs["query"].type == outputs["query"].type is str
    assert outputs["anything"].type is Any
    assert all(not socket.is_mandatory and socket.default_value is None for socket in inputs.values())


def test_run_returns_given_inputs_unchanged():
    skip = PassThrough(sockets={"documents": DOCUMENTS, "query": "str"})
    documents = [Document(id="1", content="a")]
    result = skip.run(documents=documents, query="q")
    assert result == {"documents": documents, "query": "q"}
    assert result["documents"] is documents


def test_inputs_that_were_not_given_are_omitted():
    skip = PassThrough(sockets={"documents": DOCUMENTS, "query": "str"})
    assert skip.run(documents=None, query="q") == {"query": "q"}
    assert skip.run() == {}


def test_in_a_pipeline_output_equals_retriever_output():
    store = _store()
    pipe = Pipeline()
    pipe.add_component("retriever", InMemoryBM25Retriever(store))
    pipe.add_component("reranker", PassThrough(sockets={"documents": DOCUMENTS}))
    pipe.connect("retriever.documents", "reranker.documents")
    result = pipe.run({"retriever": {"query": "apple"}}, include_outputs_from={"retriever"})
    assert result["reranker"]["documents"] == result["retriever"]["documents"]
    assert {doc.id for doc in result["reranker"]["documents"]} == {"1", "2"}


def test_in_a_pipeline_between_components_and_with_pipeline_inputs():
    store = _store()
    pipe = Pipeline()
    pipe.add_component("skip", PassThrough(sockets={"query": "str"}))
    pipe.add_component("retriever", InMemoryBM25Retriever(store))
    pipe.connect("skip.query", "retriever.query")
    direct = InMemoryBM25Retriever(store).run(query="tart")
    assert pipe.run({"skip": {"query": "tart"}})["retriever"] == direct


def test_to_dict_from_dict_round_trip():
    skip = PassThrough(sockets={"documents": DOCUMENTS, "query": "str"})
    data = skip.to_dict()
    assert data == {
        "type": "components.common.pass_through.PassThrough",
        "init_parameters": {"sockets": {"documents": DOCUMENTS, "query": "str"}},
    }
    clone = PassThrough.from_dict(data)
    assert output_sockets(clone) == output_sockets(skip)


def test_invalid_sockets_are_named():
    with pytest.raises(ValueError, match="sockets"):
        PassThrough(sockets={})
    with pytest.raises(ValueError, match=r"sockets\['documents'\].*not_a.Type"):
        PassThrough(sockets={"documents": "not_a.Type"})
