from haystack import Document

from components.context.token_budget import token_count, within_budget


def test_tokens_are_the_metrics_words_jieba_words_for_chinese():
    assert token_count("The 20 days, of Leave!") == 4  # no article, no punctuation
    assert token_count("每人每年1200元") == 3


def test_whole_passages_best_first_until_the_next_would_pass_the_budget():
    docs = [Document(content=text) for text in ("one two three", "four five six seven", "eight")]
    assert within_budget(docs, None) == docs
    assert within_budget(docs, 7) == docs[:2]
    assert within_budget(docs, 6) == docs[:1]  # "eight" would fit, but never ahead of a better passage
    assert within_budget(docs, 1) == docs[:1]  # the best is kept whatever its size: a context is never empty
    assert within_budget([], 5) == []
