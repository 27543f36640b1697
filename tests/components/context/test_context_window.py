import pytest
from haystack import Document

from components.context.context_window import ContextWindow


def docs(*sizes):
    return [Document(content="x" * n) for n in sizes]


def test_keeps_the_top_k_in_order():
    ranked = docs(1, 2, 3, 4)
    assert ContextWindow(top_k=2).run(documents=ranked)["documents"] == ranked[:2]


def test_stops_before_the_character_budget_but_keeps_the_first():
    ranked = docs(300, 300, 10)
    assert ContextWindow(top_k=3, max_chars=500).run(documents=ranked)["documents"] == ranked[:1]
    assert ContextWindow(top_k=3, max_chars=100).run(documents=ranked)["documents"] == ranked[:1]


@pytest.mark.parametrize("kwargs", [{"top_k": 0}, {"max_chars": 0}])
def test_rejects_bad_params(kwargs):
    with pytest.raises(ValueError):
        ContextWindow(**kwargs)


def test_to_dict_with_defaults():
    assert ContextWindow().to_dict() == {
        "type": "components.context.context_window.ContextWindow",
        "init_parameters": {"top_k": 3, "max_chars": None},
    }


def test_to_dict_holds_every_init_parameter_and_from_dict_restores_them():
    data = ContextWindow(top_k=4, max_chars=900).to_dict()
    assert data == {
        "type": "components.context.context_window.ContextWindow",
        "init_parameters": {"top_k": 4, "max_chars": 900},
    }
    clone = ContextWindow.from_dict(data)
    assert (clone.top_k, clone.max_chars) == (4, 900)
    assert clone.to_dict() == data
