"""The agent's tools as Haystack tools: `kb_search` over a search pipeline scoped by the request, `sql_query` over
the read-only SQL component, and `final_answer`, whose call ends the run."""

from __future__ import annotations

from typing import Any

from haystack import Document, Pipeline
from haystack.components.agents.state.state_utils import merge_lists, replace_values
from haystack.tools import ComponentTool, PipelineTool, Tool

from components.agents.agent_answer import FINAL_ANSWER
from components.agents.scoped_query import FILTERS_KEY
from components.tools.sql_query import SqlQuery

# The Agent state key holding the floor search's whole retrieval ranking (pipelines/agent_floor.py).
RANKING = "ranking"
# The Agent state key naming the retrieval paths a search dropped (they failed or timed out), over all its searches.
DEGRADED = "degraded"
# The Agent state the tools read and fill: the request's scope, what the tools returned, passages and table rows
# alike (scored as the question's context, and what its answer may cite), the floor's ranking (scored, with
# them, as its retrieval), and the paths its searches dropped.
STATE_SCHEMA: dict[str, dict[str, Any]] = {
    FILTERS_KEY: {"type": dict[str, Any] | None},
    "documents": {"type": list[Document], "handler": merge_lists},
    RANKING: {"type": list[Document], "handler": replace_values},
    DEGRADED: {"type": list[str], "handler": merge_lists},
    "deadline": {"type": float},
}
KB_SEARCH = "kb_search"
SQL_QUERY = "sql_query"
# The tools an agent may choose between (final_answer only ends the run): what golden items name in `tools`.
AGENT_TOOLS = (KB_SEARCH, SQL_QUERY)
# Characters of each passage the model reads in a search observation.
PASSAGE_CHARS = 400


def kb_search_tool(
    search: Pipeline,
    documents_output: str,
    description: str,
    ranking_output: str | None = None,
    degraded_output: str | None = None,
) -> PipelineTool:
    """`search` starts with a ScopedQuery named `scope`; `documents_output` names its result socket,
    `ranking_output` (the floor's search only) its whole retrieval ranking, which goes to the state's `ranking`, and
    `degraded_output` (a search whose paths are guarded) the paths it dropped, which go to the state's `degraded`."""
    outputs = {documents_output: "documents"}
    to_state = {"documents": {"source": "documents"}}
    for socket, key in ((ranking_output, RANKING), (degraded_output, DEGRADED)):
        if socket is not None:
            outputs[socket] = key
            to_state[key] = {"source": key}
    return PipelineTool(
        pipeline=search,
        name=KB_SEARCH,
        description=description,
        input_mapping={"query": ["scope.query"], "state": ["scope.state"]},
        output_mapping=outputs,
        outputs_to_string={"source": "documents", "handler": documents_observation},
        outputs_to_state=to_state,
    )


def sql_query_tool(sql: SqlQuery, description: str) -> ComponentTool:
    return ComponentTool(
        component=sql,
        name=SQL_QUERY,
        description=description,
        outputs_to_string={"source": "observation"},
        outputs_to_state={"documents": {"source": "documents"}},
    )


def final_answer_tool() -> Tool:
    return Tool(
        name=FINAL_ANSWER,
        description="Give the answer, citing the passages ([doc_id]) and table rows (sql:table/key) it comes from.",
        parameters={
            "type": "object",
            "properties": {
                "answer": {"type": "string"},
                "citations": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["answer", "citations"],
        },
        function=_final_answer,
    )


def documents_observation(documents: list[Document]) -> str:
    """The passages as the model reads them: each with its doc id, so the answer can cite it."""
    if not documents:
        return "no passages found"
    return "\n".join(
        f"[{d.meta.get('doc_id', d.id)}] {' '.join((d.content or '').split())[:PASSAGE_CHARS]}" for d in documents
    )


def _final_answer(answer: str, citations: list[str]) -> dict[str, Any]:
    return {"answer": answer, "citations": citations}
