import pytest
from haystack.core.serialization import component_from_dict, component_to_dict

from components.query.keyword_query import KeywordQuery


@pytest.mark.parametrize(("question", "keywords"), [
    ("What is the hotel limit per night in London?", "hotel limit per night london"),
    ("在一线城市出差，每晚住宿最多报销多少？", "一线 城市 出差 每晚 住宿 报销"),
    ("What is it?", "What is it?"),  # no content word: the question as asked
])
def test_keeps_the_content_words(question, keywords):
    assert KeywordQuery().run(query=question)["query"] == keywords


def test_at_most_max_terms_and_serialisation():
    assert KeywordQuery(max_terms=2).run(query="hotel limit per night in London")["query"] == "hotel limit"
    data = component_to_dict(KeywordQuery(max_terms=5), "k")
    assert data == {"type": "components.query.keyword_query.KeywordQuery", "init_parameters": {"max_terms": 5}}
    assert component_from_dict(KeywordQuery, data, "k").max_terms == 5
    with pytest.raises(ValueError, match="max_terms must be >= 1"):
        KeywordQuery(max_terms=0)
