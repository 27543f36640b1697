"""pipeline=agentic as conf/ builds it: the request's filters reach every search and nothing widens them; the floor
search comes first and later calls only add to it; SQL rows and passages are cited alike; a run stopped by a
safeguard is answered by the answer stage from its context (or refused, without the floor answer). The chat model is
scripted here (control flow); tests/test_run.py runs the same pipeline on
SmolLM2, and tests/pipelines/test_agent_floor.py the floor over the demo."""

from haystack import Document
from haystack.document_stores.in_memory import InMemoryDocumentStore

from components.agents.agent_answer import FLOOR_SEARCH
from experiments.datasets.golden.items import GoldenItem
from experiments.evaluation.metrics import rank_metrics
from experiments.evaluation.relevance import judge
from pipelines.builder import build_pipeline
from pipelines.spec import GOLDEN_INPUTS
from tests.support.scripted_chat_generator import ScriptedChatGenerator, call
from tests.support.shipped import composed

ACME = {"field": "meta.tenant", "operator": "==", "value": "acme"}
PAY = [
    Document(content="Acme salary bands: grade 5 earns 90k.", meta={"tenant": "acme", "doc_id": "acme/pay.md"}),
    Document(content="Globex salary bands: grade 5 earns 70k.", meta={"tenant": "globex", "doc_id": "globex/pay.md"}),
]
# More of Acme's documents on grade 5 than a search returns as passages (3), and one only a later search finds.
HANDBOOK = [
    *PAY,
    *(Document(content=f"Acme grade 5 {topic}.", meta={"tenant": "acme", "doc_id": f"acme/{name}.md"})
      for name, topic in [("bonus", "bonus is 10 percent"), ("review", "reviews are yearly"),
                          ("car", "staff get no car"), ("phone", "staff get a phone")]),
    Document(content="Acme hotel limit: 200 a night.", meta={"tenant": "acme", "doc_id": "acme/travel.md"}),
]
QUESTION = "What does grade 5 earn?"
SEARCH = "pipeline@pipeline.subpipelines.search=bm25_haystack"


def _store(documents):
    store = InMemoryDocumentStore()
    store.write_documents(documents)
    return store


def _built(tmp_path, replies, documents=PAY, *overrides):
    """The agent over `documents` with a scripted model; its floor answer quotes a sentence (answer=extractive)."""
    cfg = composed("pipeline=agentic", SEARCH, "answer=extractive", f"paths.cache={tmp_path}", *overrides)
    built = build_pipeline(cfg.pipeline, {"store": _store(documents), "index_dir": str(tmp_path)},
                           input_names=GOLDEN_INPUTS)
    built.pipeline.get_component("agent").chat_generator = ScriptedChatGenerator("", first=replies)
    return built


def _search_alone(tmp_path, documents, **inputs):
    """The retrieval kb_search wraps, as its own pipeline: its retrieval and context views for one request."""
    cfg = composed("pipeline=bm25_haystack", f"paths.cache={tmp_path}")
    built = build_pipeline(cfg.pipeline, {"store": _store(documents), "index_dir": str(tmp_path)},
                           input_names=GOLDEN_INPUTS)
    return built.view_documents(built.run(**inputs))


def _doc_ids(documents):
    return [d.meta["doc_id"] for d in documents]


def test_every_search_is_scoped_to_the_requests_filters(tmp_path):
    built = _built(tmp_path, [
        call("kb_search", query="salary bands grade 5"),
        call("kb_search", query="grade 5 salary", filters={"field": "meta.tenant", "operator": "==", "value": "globex"}),
        call("final_answer", answer="Grade 5 earns 90k.", citations=["acme/pay.md", "globex/pay.md"]),
    ])
    outputs = built.run(question="What does grade 5 earn?", filters=ACME)
    (answer,) = outputs["answer"]["answers"]
    assert [d.meta["doc_id"] for d in built.view_documents(outputs)["retrieval"]] == ["acme/pay.md"]
    assert [c["doc_id"] for c in answer.meta["citations"]] == ["acme/pay.md"]
    assert answer.meta["unknown_citations"] == ["globex/pay.md"]  # never returned, so not a citation
    assert "70k" not in str(outputs)


def test_table_rows_are_retrieved_and_cited_like_passages(tmp_path):
    built = _built(tmp_path, [
        call("sql_query", query="SELECT annual_days FROM leave_allowance WHERE office = 'SHA' AND grade = 5"),
        call("final_answer", answer="A grade-5 employee in Shanghai gets 10 annual leave days.",
             citations=["sql:leave_allowance/21"]),
    ])
    outputs = built.run(question="How many annual leave days does grade 5 get in Shanghai?")
    (answer,) = outputs["answer"]["answers"]
    context = _doc_ids(built.view_documents(outputs)["context"])
    assert context[-1] == "sql:leave_allowance/21" and len(context) > 1  # after the floor search's passages
    assert answer.data == f"A grade-5 employee in Shanghai gets 10 annual leave days. [{len(context)}]"
    assert answer.meta["refused"] is False and answer.meta["citations"][0]["doc_id"] == "sql:leave_allowance/21"
    assert answer.meta["agent"]["tools"] == ["sql_query", "final_answer"]  # the model's calls


def test_a_loop_is_answered_by_the_answer_stage_from_the_floors_passages(tmp_path):
    built = _built(tmp_path, [call("kb_search", query="pay"), call("kb_search", query="PAY ")])
    outputs = built.run(question=QUESTION, filters=ACME)
    (answer,) = outputs["answer"]["answers"]
    assert answer.data == "Acme salary bands: grade 5 earns 90k. [1]" and answer.meta["refused"] is False
    assert answer.meta["agent"]["stop_reason"] == "repeated_call" and answer.meta["agent"]["answered_by"] == "floor"
    assert [c["doc_id"] for c in answer.meta["citations"]] == ["acme/pay.md"]
    assert "Globex" not in str(outputs["answer"])  # the answer stage reads only what the scoped searches returned


def test_without_the_floor_answer_a_loop_ends_in_a_refusal_that_says_why(tmp_path):
    built = _built(tmp_path, [call("kb_search", query="pay"), call("kb_search", query="PAY ")], PAY,
                   "pipeline.components.answer.floor_answer=null")
    (answer,) = built.run(question=QUESTION, filters=ACME)["answer"]["answers"]
    assert answer.data == "I cannot answer this from the provided documents. (repeated tool call)"
    assert answer.meta["agent"]["stop_reason"] == "repeated_call" and answer.meta["refused"] is True
    assert answer.meta["agent"]["answered_by"] == "none"


def test_a_scoped_request_gets_no_table_rows(tmp_path):
    """The tables carry no tenant or ACL: for a request scoped by filters the SQL tool runs nothing."""
    built = _built(tmp_path, [
        call("sql_query", query="SELECT annual_days FROM leave_allowance WHERE office = 'SHA' AND grade = 5"),
        call("final_answer", answer="10 days.", citations=["sql:leave_allowance/21"]),
    ])
    outputs = built.run(question="How many annual leave days does grade 5 get in Shanghai?", filters=ACME)
    (answer,) = outputs["answer"]["answers"]
    assert _doc_ids(built.view_documents(outputs)["context"]) == ["acme/pay.md"]  # the floor's passage, no row
    assert answer.meta["citations"] == [] and answer.meta["unknown_citations"] == ["sql:leave_allowance/21"]
    results = [m.tool_call_results[0].result for m in outputs["agent"]["messages"] if m.tool_call_results]
    assert results[1].startswith("refused: sql_query does not run for a request scoped by filters")


def test_the_floor_searches_the_question_verbatim_before_the_model_chooses(tmp_path):
    built = _built(tmp_path, [call("final_answer", answer="Grade 5 earns 90k.", citations=["acme/pay.md"])])
    outputs = built.run(question=QUESTION, filters=ACME)
    system, user, floor, result, final, _ = outputs["agent"]["messages"]
    assert (system.role.value, user.text) == ("system", QUESTION)
    assert [(c.tool_name, c.arguments) for c in floor.tool_calls] == [("kb_search", {"query": QUESTION})]
    assert floor.meta[FLOOR_SEARCH] is True and result.tool_call_result.origin == floor.tool_calls[0]
    assert result.tool_call_result.result == "[acme/pay.md] Acme salary bands: grade 5 earns 90k."
    (answer,) = outputs["answer"]["answers"]
    assert answer.data == "Grade 5 earns 90k. [1]" and answer.meta["citations"][0]["doc_id"] == "acme/pay.md"
    # the model's own run: one step, no search of its own
    assert answer.meta["agent"] == {"steps": 1, "tools": ["final_answer"], "stop_reason": "final_answer",
                                    "tool_calls": {"kb_search": 0, "sql_query": 0, "final_answer": 1},
                                    "answered_by": "model"}
    assert final.tool_calls[0].tool_name == "final_answer"


def test_later_searches_only_add_to_the_floors_documents(tmp_path):
    built = _built(tmp_path, [call("kb_search", query="hotel limit"),
                              call("final_answer", answer="200.", citations=["acme/travel.md"])], HANDBOOK)
    views = built.view_documents(built.run(question=QUESTION, filters=ACME))
    alone = _search_alone(tmp_path, HANDBOOK, question=QUESTION, filters=ACME)
    assert len(alone["retrieval"]) > 3 and "acme/travel.md" not in _doc_ids(alone["retrieval"])
    # retrieval: the floor's whole ranking, then what the later search added; context: its 3 passages, then those
    assert _doc_ids(views["retrieval"]) == [*_doc_ids(alone["retrieval"]), "acme/travel.md"]
    assert _doc_ids(views["context"]) == [*_doc_ids(alone["context"][:3]), "acme/travel.md"]
    # so recall@k is never below the search's alone, and rises where a later search finds the evidence
    for evidence in (["acme/pay.md"], ["acme/phone.md", "acme/travel.md"]):
        item = GoldenItem(id="q", question=QUESTION, relevant_doc_ids=tuple(evidence))
        for k in (1, 3, 10):
            agent, search = (rank_metrics(judge(docs, item), [k])[f"recall_at_{k}"]
                             for docs in (views["retrieval"], alone["retrieval"]))
            assert agent >= search, (evidence, k)
    item = GoldenItem(id="q", question=QUESTION, relevant_doc_ids=("acme/travel.md",))
    assert rank_metrics(judge(views["retrieval"], item), [10])["recall_at_10"] == 1.0


def test_the_floor_search_is_scoped_to_the_principal(tmp_path):
    """The floor's search gets the request's filters from the Agent's state, as the model's searches do."""
    built = _built(tmp_path, [call("final_answer", answer="90k.", citations=["globex/pay.md"])], HANDBOOK)
    globex = {"field": "meta.tenant", "operator": "==", "value": "globex"}
    outputs = built.run(question=QUESTION, filters=globex)
    views = built.view_documents(outputs)
    assert _doc_ids(views["retrieval"]) == _doc_ids(views["context"]) == ["globex/pay.md"]
    assert "Acme" not in str(outputs["agent"]["messages"]) and "Acme" not in str(outputs["agent"]["ranking"])


def test_without_the_floor_the_model_makes_every_search(tmp_path):
    built = _built(tmp_path, [call("kb_search", query="hotel limit"),
                              call("final_answer", answer="200.", citations=["acme/travel.md"])],
                   HANDBOOK, "pipeline.components.agent.floor_search=false")
    outputs = built.run(question=QUESTION, filters=ACME)
    calls = [c for m in outputs["agent"]["messages"] for c in m.tool_calls]
    assert [(c.tool_name, c.arguments) for c in calls][0] == ("kb_search", {"query": "hotel limit"})
    views = built.view_documents(outputs)
    assert _doc_ids(views["retrieval"]) == _doc_ids(views["context"]) == ["acme/travel.md"]  # what it returned


def test_searching_the_question_again_is_a_loop_only_when_the_model_repeats_itself(tmp_path):
    """The floor's call was made for the model: its own search of the question is not a repeat (and adds nothing);
    a second one repeats the model's own call and ends the run before the next model call."""
    again = call("kb_search", query=f"  {QUESTION.lower()}")
    built = _built(tmp_path, [again, again])
    outputs = built.run(question=QUESTION, filters=ACME)
    (answer,) = outputs["answer"]["answers"]
    assert (answer.meta["agent"]["stop_reason"], answer.meta["agent"]["steps"]) == ("repeated_call", 2)
    assert _doc_ids(built.view_documents(outputs)["context"]) == ["acme/pay.md"]


def test_the_paths_kb_search_dropped_reach_the_agents_reply(tmp_path, monkeypatch):
    """The search is a guarded hybrid whose remote query embedder is down: every search (the floor's and the
    model's) answers from BM25, and the agent's run names the dense path once, as a pipeline's run would."""
    monkeypatch.setenv("OPENAI_API_KEY", "none")
    documents = [Document(content=d.content, meta=d.meta, embedding=[1.0, 0.0]) for d in HANDBOOK]
    built = _built(tmp_path, [call("kb_search", query="hotel limit"),
                              call("final_answer", answer="200.", citations=["acme/travel.md"])], documents,
                   "pipeline@pipeline.subpipelines.search=hybrid", "models/embedder=openai_compatible",
                   "models.embedder.endpoint.base_url=http://127.0.0.1:9/v1", "models.embedder.endpoint.max_retries=0")
    outputs = built.run(question=QUESTION, filters=ACME)
    assert built.degraded(outputs) == ["dense"]
    assert "acme/travel.md" in _doc_ids(built.view_documents(outputs)["context"])
