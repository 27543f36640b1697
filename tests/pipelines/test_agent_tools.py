"""kb_search keeps an agent inside the request's scope: the model picks the query, never whose documents."""

from haystack import Document, Pipeline
from haystack.components.agents import Agent
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.dataclasses import ChatMessage
from haystack.document_stores.in_memory import InMemoryDocumentStore

from components.agents.scoped_query import ScopedQuery
from pipelines.agent_tools import STATE_SCHEMA, documents_observation, final_answer_tool, kb_search_tool
from tests.support.scripted_chat_generator import ScriptedChatGenerator, call

ACME = {"field": "meta.tenant", "operator": "==", "value": "acme"}
GLOBEX = {"field": "meta.tenant", "operator": "==", "value": "globex"}


def _search() -> Pipeline:
    store = InMemoryDocumentStore()
    store.write_documents([
        Document(content="Acme salary bands: grade 5 earns 90k.", meta={"tenant": "acme", "doc_id": "acme/pay.md"}),
        Document(content="Globex salary bands: grade 5 earns 70k.", meta={"tenant": "globex", "doc_id": "globex/pay.md"}),
    ])
    search = Pipeline()
    search.add_component("scope", ScopedQuery())
    search.add_component("bm25", InMemoryBM25Retriever(document_store=store, top_k=5))
    search.connect("scope.query", "bm25.query")
    search.connect("scope.filters", "bm25.filters")
    return search


def _agent(replies) -> Agent:
    tools = [kb_search_tool(_search(), "bm25.documents", "Search the knowledge base."), final_answer_tool()]
    return Agent(chat_generator=ScriptedChatGenerator("", first=replies), tools=tools, state_schema=STATE_SCHEMA,
                 exit_conditions=["final_answer"], max_agent_steps=5)


def test_the_model_sees_only_the_query_argument():
    tool = kb_search_tool(_search(), "bm25.documents", "Search the knowledge base.")
    assert list(tool.parameters["properties"]) == ["query"]


def test_a_search_returns_only_the_requests_documents_and_an_invented_filter_is_refused():
    agent = _agent([
        call("kb_search", query="salary bands grade 5"),
        call("kb_search", query="salary bands grade 5", filters=GLOBEX),  # injected: widen to another tenant
        call("kb_search", query="salary bands grade 5", state={"filters": None}),  # or overwrite the state
        call("final_answer", answer="90k", citations=["acme/pay.md"]),
    ])
    out = agent.run(messages=[ChatMessage.from_user("What does grade 5 earn?")], filters=ACME)
    assert out["exit_reason"] == "final_answer"
    assert {d.meta["tenant"] for d in out["documents"]} == {"acme"}
    results = [m.tool_call_results[0] for m in out["messages"] if m.tool_call_results]
    assert results[0].result == "[acme/pay.md] Acme salary bands: grade 5 earns 90k." and not results[0].error
    assert results[1].error and "Globex salary" not in results[1].result  # refused as an unknown argument, not run
    assert results[2].result == results[0].result  # the live state won over the model's
    assert "Globex" not in str(out["messages"])


def test_passages_are_shown_to_the_model_with_their_doc_ids():
    docs = [Document(content="  Leave\n accrues   monthly. ", meta={"doc_id": "en/leave.md"}), Document(content="x")]
    assert documents_observation(docs) == f"[en/leave.md] Leave accrues monthly.\n[{docs[1].id}] x"
    assert documents_observation([]) == "no passages found"
