import pytest

from experiments.datasets.base import DatasetError
from experiments.datasets.golden.items import GoldenItem
from experiments.datasets.table_rows import check_table_rows


@pytest.fixture
def sql(tmp_path):
    script = tmp_path / "t.sql"
    script.write_text("CREATE TABLE offices (code TEXT PRIMARY KEY, city TEXT);\n"
                      "INSERT INTO offices VALUES ('SEA', 'Seattle');\n", encoding="utf-8")
    return str(script)


def item(item_id, *rows):
    return GoldenItem(id=item_id, question="?", rows=rows)


def test_rows_that_exist_pass_and_items_without_rows_need_no_tables(sql):
    check_table_rows([item("a", "sql:offices/SEA"), item("b")], sql)
    check_table_rows([item("b")], None)


def test_a_missing_row_or_table_is_named_with_the_item_that_cites_it(sql):
    with pytest.raises(DatasetError) as error:
        check_table_rows([item("a", "sql:offices/SEA", "sql:offices/AUS"), item("b", "sql:assets/1")], sql)
    assert str(error.value) == (f"dataset.sql: 2 golden table row(s) not in {sql}: sql:assets/1 (item b), "
                                "sql:offices/AUS (item a)")


def test_rows_without_tables_say_which_key_to_set():
    with pytest.raises(DatasetError, match=r"^dataset.sql: golden item a cites the table row sql:offices/SEA, but"):
        check_table_rows([item("a", "sql:offices/SEA"), item("b", "sql:offices/AUS")], None)
