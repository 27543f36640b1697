"""The agent's SQL tool: real SQLite, the demo's tables, and an adversarial suite that must all be refused unrun."""

import hashlib
import sqlite3
from pathlib import Path

import pytest
from haystack.components.agents.state import State
from haystack.tools import ComponentTool

from components.tools.sql_guard import SqlGuard, SqlRefused
from components.tools.sql_query import SCOPED_REFUSAL, SqlQuery

SCRIPT = Path(__file__).resolve().parents[3] / "data" / "demo" / "sql" / "company.sql"

ADVERSARIAL = [
    "SELECT 1; DROP TABLE offices",
    "SELECT * FROM offices;DELETE FROM offices",
    "SELECT * FROM offices; ATTACH DATABASE '/tmp/ragtune_evil.db' AS evil",
    "SELECT code FROM offices;; SELECT city FROM offices",
    "ATTACH DATABASE '/tmp/ragtune_evil.db' AS evil",
    "attach '/etc/passwd' as p",
    "DETACH DATABASE main",
    "PRAGMA writable_schema = 1",
    "PRAGMA query_only = OFF",
    "PRAGMA journal_mode = DELETE",
    "SELECT * FROM pragma_table_info('offices')",
    "INSERT INTO offices VALUES ('X', 'x', 'x', 'x', 'x')",
    "UPDATE leave_allowance SET annual_days = 99",
    "DELETE FROM it_assets",
    "REPLACE INTO offices VALUES ('SHA', 'x', 'x', 'x', 'x')",
    "DROP TABLE offices",
    "CREATE TABLE stolen AS SELECT * FROM offices",
    "ALTER TABLE offices ADD COLUMN pwned TEXT",
    "INSERT INTO offices SELECT * FROM offices",
    "VACUUM INTO '/tmp/ragtune_copy.db'",
    "WITH gone AS (DELETE FROM offices RETURNING *) SELECT * FROM gone",
    "WITH x AS (SELECT 1) DELETE FROM offices",
    "WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c) SELECT count(*) FROM c",
    "SELECT load_extension('/tmp/evil.so')",
    "SELECT LOAD_EXTENSION('libevil')",
    "SELECT * FROM offices WHERE load_extension('x') IS NULL",
    "SELECT readfile('/etc/passwd')",
    "SELECT writefile('/tmp/ragtune_x', 'y')",
    "SELECT zeroblob(2000000000)",
    "SELECT randomblob(1000000000)",
    "SELECT * FROM it_assets, leave_allowance, offices",
    "SELECT * FROM it_assets CROSS JOIN leave_allowance",
    "SELECT * FROM it_assets a JOIN it_assets b ON 1 = 1",
    "SELECT * FROM it_assets a JOIN it_assets b ON a.id = b.id JOIN it_assets c ON c.id = b.id JOIN it_assets d ON d.id = c.id",
    "SELECT * FROM offices /* ; DROP TABLE offices */",
    "SELECT * FROM offices -- ; DROP TABLE offices",
    "SELECT * FROM offices/**/WHERE/**/1 = 1",
    "/*!50000 DROP TABLE offices*/",
    "ＳＥＬＥＣＴ * FROM offices",
    "SELECT * FROM оffices",
    "SELECT * FROM offices WHERE ϲode = 'SHA'",
    "SELECT * FROM it_assets WHERE \u212aind = 'laptop'",
    "SELECT * FROM offices\u037e DROP TABLE offices",
    "SELECT * FROM offices WHERE code = 'SHA'\uff1b DROP TABLE offices",
    "SELECT * FROM sqlite_master",
    "SELECT * FROM sqlite_schema",
    "SELECT * FROM main.offices",
    "SELECT name FROM sqlite_temp_master",
    "SELECT * FROM salaries",
    "SELECT * FROM offices WHERE code IN (SELECT name FROM sqlite_master)",
    "SELECT code FROM offices UNION SELECT sql FROM sqlite_master",
    'SELECT * FROM offices WHERE city = "Shanghai"',
    "SELECT " + "1 + " * 600 + "1",
]
# Files an executed attack would have made.
ATTACK_FILES = ["/tmp/ragtune_evil.db", "/tmp/ragtune_copy.db", "/tmp/ragtune_x"]


@pytest.fixture
def tool(tmp_path):
    query = SqlQuery(database=str(SCRIPT), cache_dir=str(tmp_path / "sql"))
    query.warm_up()
    return query


def _database_state(tool: SqlQuery) -> tuple[str, list]:
    (path,) = Path(tool.cache_dir).glob("*.sqlite")
    with sqlite3.connect(path) as connection:
        rows = [connection.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall()
                for t in ("offices", "leave_allowance", "it_assets")]
        schema = connection.execute("SELECT sql FROM sqlite_master ORDER BY name").fetchall()
    return hashlib.sha256(path.read_bytes()).hexdigest(), [rows, schema]


def test_the_adversarial_suite_is_refused_by_the_guard_and_nothing_runs(tool):
    assert len(ADVERSARIAL) >= 40
    before = _database_state(tool)
    for attack in ADVERSARIAL:
        reply = tool.run(query=attack)
        assert reply["rows"] == reply["citations"] == reply["documents"] == [], attack
        assert reply["observation"].startswith("refused: "), attack
        assert "SQLite could not run it" not in reply["observation"], attack  # the guard, not SQLite, stopped it
        with pytest.raises(SqlRefused):
            tool._guard.check(attack)
    assert _database_state(tool) == before
    assert not [f for f in ATTACK_FILES if Path(f).exists()]


@pytest.mark.parametrize(
    ("attack", "reason"),
    [
        ("SELECT 1; DROP TABLE offices", "exactly one statement is allowed, got 2"),
        ("WITH gone AS (DELETE FROM offices RETURNING *) SELECT * FROM gone", "WITH is not allowed"),
        ("SELECT load_extension('/tmp/evil.so')", "function load_extension() is not allowed"),
        ("VACUUM INTO '/tmp/ragtune_copy.db'", "VACUUM is not allowed"),
        ("SELECT * FROM it_assets a JOIN it_assets b ON 1 = 1", "every join needs an ON condition on columns"),
        ("SELECT * FROM offices -- ; DROP TABLE offices", "comments are not allowed"),
        ("SELECT * FROM оffices", "identifier 'оffices' is not plain ASCII"),
        ("SELECT * FROM it_assets WHERE \u212aind = 'laptop'", "is not plain ASCII"),
        ("SELECT * FROM main.offices", "main.offices: name the table without a schema"),
        ('SELECT * FROM offices WHERE city = "Shanghai"', "unknown column 'Shanghai'"),
        ("SHA", "'SHA' is not a query; write one SELECT ... FROM <table>"),
    ],
)
def test_a_refusal_says_why_so_the_agent_can_correct_itself(tool, attack, reason):
    assert reason in tool.run(query=attack)["observation"]


def test_rows_are_answered_and_cite_the_table_rows_they_come_from(tool):
    lookup = tool.run(query="select annual_days, carry_over_days from leave_allowance where office='SHA' and grade=5")
    assert lookup["rows"] == [{"annual_days": 10, "carry_over_days": 10}]
    assert lookup["citations"] == ["sql:leave_allowance/21"]
    total = tool.run(query="SELECT SUM(quantity) AS laptops FROM it_assets WHERE kind = 'laptop' AND office = 'SHA'")
    assert total["rows"] == [{"laptops": 39}]
    assert total["citations"] == ["sql:it_assets/3", "sql:it_assets/9", "sql:it_assets/11"]  # every row summed
    top = tool.run(query="SELECT o.city_zh, l.annual_days FROM leave_allowance l JOIN offices o ON o.code = l.office "
                         "WHERE l.grade = 8 ORDER BY l.annual_days DESC, o.code LIMIT 1")
    assert top["rows"] == [{"city_zh": "奥斯汀", "annual_days": 25}]
    assert top["citations"] == ["sql:leave_allowance/16", "sql:offices/AUS"]  # only the row returned
    assert [(d.id, d.meta["doc_id"], d.content) for d in top["documents"]] == [
        ("sql:leave_allowance/16", "sql:leave_allowance/16",
         "leave_allowance\nid: 16\noffice: AUS\ngrade: 8\nannual_days: 25\nsick_days: 10\ncarry_over_days: 5"),
        ("sql:offices/AUS", "sql:offices/AUS",
         "offices\ncode: AUS\ncity: Austin\ncity_zh: 奥斯汀\ncountry: United States\ntimezone: America/Chicago"),
    ]
    assert "1 rows for: SELECT o.city_zh" in top["observation"]


def test_a_limit_is_added_or_lowered_to_max_rows(tmp_path):
    tool = SqlQuery(database=str(SCRIPT), cache_dir=str(tmp_path), max_rows=4)
    tool.warm_up()
    for query in ("SELECT * FROM it_assets", "SELECT * FROM it_assets LIMIT 100000"):
        reply = tool.run(query=query)
        assert len(reply["rows"]) == 4 and reply["observation"].startswith("4 rows for: SELECT * FROM it_assets LIMIT 4")
    assert len(tool.run(query="SELECT * FROM it_assets LIMIT 2")["rows"]) == 2


def test_tables_outside_the_allowlist_are_refused(tmp_path):
    tool = SqlQuery(database=str(SCRIPT), cache_dir=str(tmp_path), tables=["offices", "leave_allowance"])
    tool.warm_up()
    assert tool.run(query="SELECT * FROM it_assets")["observation"] == (
        "refused: unknown table 'it_assets'; tables: leave_allowance, offices")
    with pytest.raises(ValueError, match=r"tables \['payroll'\] are not in"):
        SqlQuery(database=str(SCRIPT), cache_dir=str(tmp_path), tables=["payroll"]).warm_up()


def test_a_query_past_its_time_limit_is_interrupted(tmp_path):
    path = tmp_path / "big.sqlite"
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE n (id INTEGER PRIMARY KEY, v INTEGER)")
        connection.executemany("INSERT INTO n VALUES (?, ?)", ((i, i % 7) for i in range(20_000)))
    connection.close()
    tool = SqlQuery(database=str(path), timeout_s=0.2)
    tool.warm_up()
    reply = tool.run(query="SELECT COUNT(*) FROM n a JOIN n b ON a.v <> b.id")
    assert reply == {"rows": [], "citations": [], "documents": [],
                     "observation": "refused: the query ran past its 0.2 s limit"}
    assert tool.run(query="SELECT COUNT(*) AS k FROM n")["rows"] == [{"k": 20_000}]  # the next query runs


def test_sqlite_itself_refuses_writes_that_got_past_the_guard(tool):
    """The file is opened read-only and the authorizer allows only reads: a second line of defence."""
    for statement in ("DELETE FROM offices", "ATTACH DATABASE '/tmp/ragtune_evil.db' AS evil",
                      "PRAGMA query_only = OFF", "SELECT load_extension('x')"):
        with pytest.raises(SqlRefused, match="SQLite could not run it"):
            tool._execute(statement)
    assert not Path("/tmp/ragtune_evil.db").exists()


def test_the_guard_alone_accepts_plain_reads():
    guard = SqlGuard({"t": ["id", "name"]}, max_rows=10)
    assert guard.check("select name from T where id between 1 and 3").sql == (
        "SELECT name FROM T WHERE id BETWEEN 1 AND 3 LIMIT 10")
    assert guard.check("SELECT x.name AS n FROM t x ORDER BY n").tables == {"x": "t"}


def test_to_dict_and_back():
    tool = SqlQuery(database="company.sql", tables=["offices"], max_rows=5, timeout_s=1.0, cache_dir="/tmp/c")
    data = tool.to_dict()
    assert data == {
        "type": "components.tools.sql_query.SqlQuery",
        "init_parameters": {"database": "company.sql", "tables": ["offices"], "max_rows": 5, "max_tables": 3,
                            "timeout_s": 1.0, "cache_dir": "/tmp/c"},
    }
    assert SqlQuery.from_dict(data).to_dict() == data


def test_it_is_a_haystack_tool_whose_only_argument_is_the_query(tool):
    sql_tool = ComponentTool(component=tool, name="sql_query", description="Read-only SQL over the company tables.",
                             outputs_to_string={"source": "observation"})
    assert list(sql_tool.parameters["properties"]) == ["query"] and sql_tool.parameters["required"] == ["query"]
    reply = sql_tool.invoke(query="SELECT city FROM offices WHERE code = 'SZX'")
    assert reply["observation"] == (
        "1 rows for: SELECT city FROM offices WHERE code = 'SZX' LIMIT 50\ncity=Shenzhen\nrows read: sql:offices/SZX")


def test_under_an_agent_scoped_by_filters_nothing_runs(tool):
    schema = {"filters": {"type": dict | None}}
    scoped = State(schema=schema, data={"filters": {"field": "meta.tenant", "operator": "==", "value": "acme"}})
    reply = tool.run(query="SELECT * FROM offices", state=scoped)
    assert reply == {"rows": [], "citations": [], "documents": [], "observation": SCOPED_REFUSAL}
    assert len(tool.run(query="SELECT * FROM offices", state=State(schema=schema))["rows"]) == 4  # unscoped
