"""Checks an agent's SQL by parsing it, before SQLite sees it: one SELECT over allowlisted tables and columns.

Nothing is matched by keyword. sqlglot parses the text as SQLite, and the tree must consist only of the node types
a read-only question needs. So a write, a CTE, ATTACH, PRAGMA, an unknown function (load_extension), a second
statement or a comment is refused because of what it *is*. The SQL that runs is regenerated from the checked tree,
with a LIMIT, so what runs is exactly what was checked.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

# The longest query text accepted; an agent's question about a few tables fits easily.
MAX_SQL_CHARS = 2000

# Node types a read-only question over a few tables is made of. Anything else is refused by its type.
ALLOWED_NODES: tuple[type[exp.Expression], ...] = (
    exp.Select, exp.From, exp.Join, exp.Where, exp.Group, exp.Having, exp.Order, exp.Ordered, exp.Limit, exp.Offset,
    exp.Table, exp.TableAlias, exp.Alias, exp.Column, exp.Identifier, exp.Star, exp.Literal, exp.Null, exp.Boolean,
    exp.Paren, exp.Subquery, exp.Tuple, exp.Distinct,
    exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.And, exp.Or, exp.Not, exp.Is, exp.In, exp.Between,
    exp.Like, exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod, exp.Neg, exp.DPipe,
    exp.Case, exp.If, exp.Coalesce, exp.Count, exp.Sum, exp.Avg, exp.Min, exp.Max, exp.Abs, exp.Round,
    exp.Lower, exp.Upper, exp.Length, exp.Trim, exp.Substring, exp.Cast, exp.DataType,
)


class SqlRefused(ValueError):
    """A query the guard will not run; the message is the observation the agent gets back."""


@dataclass(frozen=True)
class CheckedQuery:
    """A query that passed: its tree (and the SQL to run, regenerated from it), and the tables it reads under the
    names it gives them."""

    select: exp.Select  # the checked tree, LIMIT included
    tables: dict[str, str]  # alias (or the table's own name) -> table

    @property
    def sql(self) -> str:
        return self.select.sql(dialect="sqlite")


class SqlGuard:
    """Parses SQL as SQLite and accepts one SELECT over `tables` (table -> its columns), with at most
    `max_tables` table references, every join conditioned, and at most `max_rows` rows."""

    def __init__(self, tables: Mapping[str, Sequence[str]], max_rows: int = 50, max_tables: int = 3) -> None:
        if max_rows < 1 or max_tables < 1:
            raise ValueError(f"max_rows and max_tables must be >= 1, got {max_rows} and {max_tables}")
        self.columns = {table.lower(): {c.lower() for c in columns} for table, columns in tables.items()}
        self.max_rows = max_rows
        self.max_tables = max_tables

    def check(self, sql: str) -> CheckedQuery:
        """The query as it will run, or SqlRefused saying why not."""
        select = self._parse(sql)
        for node in select.walk():
            if not isinstance(node, ALLOWED_NODES):
                raise SqlRefused(f"refused: {_describe(node)} is not allowed; write one read-only SELECT")
            if node.comments:
                raise SqlRefused("refused: comments are not allowed in a query")
            if isinstance(node, exp.Identifier) and not node.name.isascii():
                raise SqlRefused(f"refused: identifier {node.name!r} is not plain ASCII; name tables and columns "
                                 f"as the schema does, and put text values in single quotes")
        tables = self._tables(select)
        self._check_joins(select)
        self._check_columns(select, tables)
        _cap_limit(select, self.max_rows)
        return CheckedQuery(select, tables)

    def _parse(self, sql: str) -> exp.Select:
        if len(sql) > MAX_SQL_CHARS:
            raise SqlRefused(f"refused: the query is longer than {MAX_SQL_CHARS} characters")
        try:
            with _quiet_sqlglot():
                statements = [s for s in sqlglot.parse(sql, read="sqlite") if s is not None]
        except (ParseError, TokenError) as e:
            raise SqlRefused(f"refused: the query does not parse as SQLite ({str(e).splitlines()[0]})") from None
        if not statements:
            raise SqlRefused("refused: no SQL statement found")
        if len(statements) > 1:
            raise SqlRefused(f"refused: exactly one statement is allowed, got {len(statements)}")
        if isinstance(statements[0], exp.Condition):  # a bare value or expression, such as a search term
            raise SqlRefused(f"refused: {sql.strip()[:80]!r} is not a query; write one SELECT ... FROM <table>")
        if not isinstance(statements[0], exp.Select):
            raise SqlRefused(f"refused: {_describe(statements[0])} is not allowed; write one read-only SELECT")
        return statements[0]

    def _tables(self, select: exp.Select) -> dict[str, str]:
        tables: dict[str, str] = {}
        references = list(select.find_all(exp.Table))
        if len(references) > self.max_tables:
            raise SqlRefused(f"refused: the query reads {len(references)} tables; at most {self.max_tables}")
        for table in references:
            if table.args.get("db") or table.args.get("catalog"):
                raise SqlRefused(f"refused: {table.sql(dialect='sqlite')}: name the table without a schema")
            name = table.name.lower()
            if name not in self.columns:
                raise SqlRefused(f"refused: unknown table {table.name!r}; tables: {', '.join(sorted(self.columns))}")
            tables[(table.alias or table.name).lower()] = name
        return tables

    def _check_joins(self, select: exp.Select) -> None:
        for join in select.find_all(exp.Join):
            condition = join.args.get("on")
            if not (join.args.get("using") or (condition is not None and condition.find(exp.Column))):
                raise SqlRefused("refused: every join needs an ON condition on columns, or USING (no cross joins)")

    def _check_columns(self, select: exp.Select, tables: Mapping[str, str]) -> None:
        aliases = {a.alias.lower() for a in select.find_all(exp.Alias)}
        readable = set().union(*(self.columns[t] for t in tables.values()))
        for column in select.find_all(exp.Column):
            if isinstance(column.this, exp.Star):
                continue
            name, qualifier = column.name.lower(), column.table.lower()
            if qualifier:
                if qualifier not in tables:
                    raise SqlRefused(f"refused: {column.table!r} names no table of this query")
                allowed = self.columns[tables[qualifier]]
            else:
                allowed = readable | aliases
            if name not in allowed:
                raise SqlRefused(
                    f"refused: unknown column {column.name!r}; columns: {', '.join(sorted(readable))} "
                    f"(text values go in single quotes)"
                )


@contextmanager
def _quiet_sqlglot() -> Iterator[None]:
    """sqlglot warns when it keeps a statement it cannot parse as text; the guard refuses those, saying why."""
    logger = logging.getLogger("sqlglot")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def _cap_limit(select: exp.Select, max_rows: int) -> None:
    limit = select.args.get("limit")
    value = limit.expression if isinstance(limit, exp.Limit) else None
    if not (isinstance(value, exp.Literal) and value.is_int and int(value.this) <= max_rows):
        select.limit(max_rows, copy=False)


def _describe(node: exp.Expression) -> str:
    if isinstance(node, exp.Anonymous):
        return f"function {node.name}()"
    if isinstance(node, exp.Func):
        return f"function {node.sql_name()}()"
    if isinstance(node, exp.Command):  # a statement sqlglot keeps as text (REPLACE, VACUUM): named by its keyword
        return str(node.this).upper()
    return node.key.upper()
