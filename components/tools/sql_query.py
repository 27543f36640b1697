"""The agent's read-only SQL tool: a query checked by SqlGuard runs on a SQLite file opened read-only, under an
authorizer and a time limit, and its rows come back with the ids of the table rows they were computed from."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any

from haystack import Document, component, default_from_dict, default_to_dict
from haystack.components.agents.state import State
from sqlglot import exp

from components.agents.scoped_query import FILTERS_KEY
from components.common.paths import cache_root
from components.tools.sql_guard import CheckedQuery, SqlGuard, SqlRefused

# What SQLite's authorizer lets a statement do: read tables and call the guard's functions, nothing else.
READ_ACTIONS = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION}
# What a request scoped to a principal gets: the tables carry no tenant or ACL, so none of their rows is for it.
SCOPED_REFUSAL = ("refused: sql_query does not run for a request scoped by filters (the tables carry no access "
                  "control); search the documents instead")
# SQLite VM instructions between two checks of the time limit.
PROGRESS_STEPS = 10_000


@component
class SqlQuery:
    """
    Answers one SELECT over a SQLite database, for an agent's `sql_query` tool.

    Three layers keep it read-only. SqlGuard parses the query and accepts only a single SELECT over the allowlisted
    tables and columns, with a LIMIT. The file is opened with `mode=ro`. SQLite's authorizer denies every action
    but reading. A query that runs past `timeout_s` is interrupted. A refusal or an error comes back as
    `observation` text, not an exception, so the agent can correct itself. Tables carry no tenant or ACL, so under
    an Agent whose request is scoped by filters (its State's `filters`) nothing runs at all.

    Each answer cites the rows it was computed from as `sql:<table>/<primary key>`, and returns each of those rows
    as a Document with that `doc_id`, so an answer's citations are checked, and its sentences supported, as with
    passages.

    ### Usage example
    ```python
    tool = SqlQuery(database="data/demo/sql/company.sql")
    tool.warm_up()
    tool.run(query="SELECT annual_days FROM leave_allowance WHERE office = 'SHA' AND grade = 5")
    ```
    """

    def __init__(
        self,
        database: str,
        tables: list[str] | None = None,
        max_rows: int = 50,
        max_tables: int = 3,
        timeout_s: float = 2.0,
        cache_dir: str | None = None,
    ) -> None:
        """
        :param database: A SQLite file, or a `.sql` script built once into a file under `cache_dir`.
        :param tables: The tables the agent may read; None: every table of the database.
        :param max_rows: Rows per answer, at most (a LIMIT is added or lowered to it).
        :param max_tables: Table references per query, at most.
        :param timeout_s: Seconds a query may run.
        :param cache_dir: Where a `.sql` script's database file is kept, named by the script's digest; None:
            `<cache root>/sql` ($RAGTUNE_CACHE, else .cache/ragtune, as `paths.cache`).
        """
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
        self.database = database
        self.tables = tables
        self.max_rows = max_rows
        self.max_tables = max_tables
        self.timeout_s = timeout_s
        self.cache_dir = cache_dir if cache_dir is not None else str(cache_root() / "sql")
        self._connection: sqlite3.Connection | None = None
        self._guard: SqlGuard | None = None
        self._primary_keys: dict[str, str] = {}
        self._columns: dict[str, list[str]] = {}

    def warm_up(self) -> None:
        """Opens the database read-only and reads its schema: the allowlist and each table's primary key."""
        if self._connection is not None:
            return
        path = self._database_file()
        connection = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, check_same_thread=False)
        schema = _schema(connection)
        unknown = sorted(set(self.tables or []) - set(schema))
        if unknown:
            raise ValueError(f"tables {unknown} are not in {self.database} (it has {sorted(schema)})")
        allowed = {t: columns for t, (columns, _) in schema.items() if self.tables is None or t in self.tables}
        self._primary_keys = {t: pk for t, (_, pk) in schema.items() if t in allowed and pk}
        self._columns = allowed
        self._guard = SqlGuard(allowed, max_rows=self.max_rows, max_tables=self.max_tables)
        connection.execute("PRAGMA query_only = ON")
        connection.set_authorizer(_read_only)
        self._connection = connection

    def close(self) -> None:
        """Closes the database; warm_up() opens it again."""
        if self._connection is not None:
            self._connection.close()
            self._connection = None
            self._guard = None

    def schema_text(self) -> str:
        """The allowed tables and their columns, e.g. `offices(code, city)`, for the tool's description."""
        if self._guard is None:
            raise RuntimeError("SqlQuery: call warm_up() before schema_text()")
        return "; ".join(f"{table}({', '.join(self._columns[table])})" for table in sorted(self._columns))

    @component.output_types(rows=list[dict[str, Any]], citations=list[str], documents=list[Document], observation=str)
    def run(self, query: str, state: State | None = None) -> dict[str, Any]:
        """
        :param query: One SQLite SELECT.
        :param state: An Agent's live state, injected by Haystack (never by the model): a request scoped by
            `filters` gets no rows.
        :returns: `rows` as column -> value, `citations` (`sql:<table>/<pk>` of the rows read), `documents` (each
            row read, as `column: value` lines under its citation as doc_id), and `observation`: the rows as text
            for the agent, or why the query was refused.
        """
        if self._connection is None or self._guard is None:
            raise RuntimeError("SqlQuery: call warm_up() before run()")
        if state is not None and state.get(FILTERS_KEY) is not None:
            return {"rows": [], "citations": [], "documents": [], "observation": SCOPED_REFUSAL}
        try:
            checked = self._guard.check(query)
            rows = self._execute(checked.sql)
            citations = self._citations(checked)
            documents = self.row_documents(citations)
        except SqlRefused as refused:
            return {"rows": [], "citations": [], "documents": [], "observation": str(refused)}
        observation = _as_text(checked.sql, rows, citations)
        return {"rows": rows, "citations": citations, "documents": documents, "observation": observation}

    def _execute(self, sql: str) -> list[dict[str, Any]]:
        assert self._connection is not None
        deadline = time.monotonic() + self.timeout_s
        self._connection.set_progress_handler(lambda: int(time.monotonic() > deadline), PROGRESS_STEPS)
        try:
            cursor = self._connection.execute(sql)
            names = [d[0] for d in cursor.description]
            return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
        except sqlite3.DatabaseError as e:
            if isinstance(e, sqlite3.OperationalError) and "interrupted" in str(e):
                raise SqlRefused(f"refused: the query ran past its {self.timeout_s:g} s limit") from None
            raise SqlRefused(f"refused: SQLite could not run it ({e})") from None
        finally:
            self._connection.set_progress_handler(None, PROGRESS_STEPS)

    def _citations(self, checked: CheckedQuery) -> list[str]:
        """The primary keys of the rows that satisfy the query's FROM and WHERE, for each table it reads there."""
        select = checked.select
        outer = {(t.alias or t.name).lower() for t in _outer_tables(select)}
        cited = [(a, table) for a, table in checked.tables.items() if table in self._primary_keys and a in outer]
        if not cited:
            return []
        keys = [exp.column(self._primary_keys[table], table=alias) for alias, table in cited]
        rows_read = select.select(*keys, append=False, copy=True)
        rows_read.set("distinct", None)
        aggregates = any(f.find_ancestor(exp.Select) is select for f in select.find_all(exp.AggFunc))
        if select.args.get("group") or aggregates:  # an aggregate reads every row that matches
            for arg in ("group", "having", "order", "offset"):
                rows_read.set(arg, None)
            rows_read.limit(self.max_rows, copy=False)
        found: list[str] = []
        for row in self._execute(rows_read.sql(dialect="sqlite")):
            for (_, table), key in zip(cited, row.values(), strict=True):
                citation = f"sql:{table}/{key}"
                if key is not None and citation not in found:
                    found.append(citation)
        return found

    def row_documents(self, citations: list[str]) -> list[Document]:
        """The cited rows, whole, as documents (their table's columns as `column: value` lines), one query a table;
        a citation of a row or table that does not exist gets none."""
        if self._connection is None:
            raise RuntimeError("SqlQuery: call warm_up() before row_documents()")
        keys: dict[str, list[str]] = {}
        for citation in citations:
            table, key = citation.removeprefix("sql:").split("/", 1)
            if table in self._primary_keys:
                keys.setdefault(table, []).append(key)
        contents: dict[str, str] = {}
        for table, wanted in keys.items():
            primary = self._primary_keys[table]
            select = exp.select("*").from_(table).where(exp.column(primary).isin(*map(_literal, wanted)))
            for row in self._execute(select.sql(dialect="sqlite")):
                lines = "\n".join(f"{column}: {value}" for column, value in row.items())
                contents[f"sql:{table}/{row[primary]}"] = f"{table}\n{lines}"
        return [Document(id=c, content=contents[c], meta={"doc_id": c, "source": "sql"}) for c in citations
                if c in contents]

    def _database_file(self) -> Path:
        source = Path(self.database)
        if not source.is_file():
            raise FileNotFoundError(f"SqlQuery: database {self.database} does not exist")
        if source.suffix != ".sql":
            return source
        script = source.read_text(encoding="utf-8")
        target = Path(self.cache_dir) / f"{source.stem}-{hashlib.sha256(script.encode()).hexdigest()[:16]}.sqlite"
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, temporary = tempfile.mkstemp(dir=target.parent, suffix=".sqlite")
            os.close(fd)
            with sqlite3.connect(temporary) as built:
                built.executescript(script)
            built.close()
            os.replace(temporary, target)
        return target

    def to_dict(self) -> dict[str, Any]:
        return default_to_dict(
            self, database=self.database, tables=self.tables, max_rows=self.max_rows, max_tables=self.max_tables,
            timeout_s=self.timeout_s, cache_dir=self.cache_dir,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SqlQuery:
        return default_from_dict(cls, data)


def _schema(connection: sqlite3.Connection) -> dict[str, tuple[list[str], str | None]]:
    """Table -> (its columns, its single-column primary key or None)."""
    tables = [r[0] for r in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    schema = {}
    for table in tables:
        info = connection.execute(f'PRAGMA table_info("{table}")').fetchall()
        keys = [row[1] for row in info if row[5]]
        schema[table.lower()] = ([row[1] for row in info], keys[0] if len(keys) == 1 else None)
    return schema


def _outer_tables(select: exp.Select) -> list[exp.Table]:
    """The tables of the query's own FROM and JOINs, not of its subqueries."""
    sources = [select.args.get("from_") or select.args.get("from"), *select.args.get("joins", [])]
    return [node.this for node in sources if node is not None and isinstance(node.this, exp.Table)]


def _literal(key: str) -> exp.Literal:
    return exp.Literal.number(key) if key.lstrip("-").isdigit() else exp.Literal.string(key)


def _read_only(action: int, *_: Any) -> int:
    return sqlite3.SQLITE_OK if action in READ_ACTIONS else sqlite3.SQLITE_DENY


def _as_text(sql: str, rows: list[dict[str, Any]], citations: list[str]) -> str:
    if not rows:
        return f"no rows for: {sql}"
    lines = [" | ".join(f"{k}={v}" for k, v in row.items()) for row in rows]
    return f"{len(rows)} rows for: {sql}\n" + "\n".join(lines) + f"\nrows read: {', '.join(citations) or 'none'}"
