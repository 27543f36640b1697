"""Golden items may name the table rows their answer comes from (`rows`); each must exist in the data set's tables."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence

from components.tools.sql_query import SqlQuery
from experiments.datasets.base import DatasetError
from experiments.datasets.golden.items import GoldenItem

# Missing rows named in the error, at most.
_SHOWN = 5


def check_table_rows(golden: Sequence[GoldenItem], sql: str | None) -> None:
    """Raises DatasetError naming `dataset.sql` when an item cites a row that `sql` (a SQLite file or .sql script)
    does not have, or cites rows while the data set has no tables."""
    cited: dict[str, str] = {}  # each row and the first item citing it
    for item in golden:
        for row in item.rows:
            cited.setdefault(row, item.id)
    if not cited:
        return
    if sql is None:
        row, item_id = next(iter(cited.items()))
        raise DatasetError(f"dataset.sql: golden item {item_id} cites the table row {row}, but the data set has "
                           "no tables; set dataset.sql to its SQLite file or .sql script")
    with tempfile.TemporaryDirectory(prefix="ragtune-rows-") as cache:
        tables = SqlQuery(database=sql, cache_dir=cache)
        tables.warm_up()
        found = {doc.id for doc in tables.row_documents(sorted(cited))}
        tables.close()
    missing = [f"{row} (item {item_id})" for row, item_id in sorted(cited.items()) if row not in found]
    if missing:
        raise DatasetError(f"dataset.sql: {len(missing)} golden table row(s) not in {sql}: "
                           + ", ".join(missing[:_SHOWN]) + (" ..." if len(missing) > _SHOWN else ""))
