"""The demo's agent questions (data/demo/golden_agent.jsonl, dataset=demo_agent): loaded as a run loads them, so every
quote is located in the corpus and every cited row exists in data/demo/sql/company.sql, and each table answer is
what its rows say."""

import re
from collections import Counter

import pytest

from components.tools.sql_query import SqlQuery
from experiments.datasets import load_dataset
from experiments.datasets.demo import DEMO_DIR

SQL = str(DEMO_DIR / "sql" / "company.sql")
# A whole number or term: not inside a Latin word or a longer number ("13" in "Air 13 M3", "10" in "10天").
ALONE, ALONE_AFTER = "(?<![A-Za-z0-9])", "(?![A-Za-z0-9])"


@pytest.fixture(scope="module")
def golden(tmp_path_factory):
    config = {"kind": "demo", "name": "demo_agent", "golden": ["golden_agent.jsonl"], "sql": SQL}
    return load_dataset(config, tmp_path_factory.mktemp("cache")).golden


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    tool = SqlQuery(database=SQL, cache_dir=str(tmp_path_factory.mktemp("sql")))
    tool.warm_up()
    yield tool
    tool.close()


@pytest.mark.parametrize("language", ["en", "zh"])
def test_each_language_has_the_table_questions_the_agent_is_measured_on(golden, language):
    items = [item for item in golden if item.id.startswith(f"{language}-")]
    needs_sql = [item for item in items if item.answerable and "sql_query" in item.tools]
    both = [item for item in needs_sql if "kb_search" in item.tools]
    assert len(needs_sql) >= 24 and len(both) >= 8
    assert all(item.tools for item in items) and all(item.rows for item in needs_sql)
    assert all(item.evidence_spans and all(item.evidence_spans) for item in both)
    assert Counter(item.answerable for item in items)[False] >= 2


def test_every_table_answer_is_what_its_rows_say(golden, tables):
    for item in golden:
        if not item.answerable or item.category == "table_aggregate":
            continue
        rows = " ".join(doc.content or "" for doc in tables.row_documents(list(item.rows)))
        from_table = re.split("[;；]", item.reference_answer)[0]
        numbers = re.findall(f"{ALONE}[0-9]+{ALONE_AFTER}", from_table)
        wanted = numbers or [max(re.findall(r"[A-Za-z][A-Za-z0-9]+", from_table), key=len)]
        assert all(re.search(f"{ALONE}{token}{ALONE_AFTER}", rows) for token in wanted), (item.id, wanted, rows)
