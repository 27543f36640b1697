import pickle

import jieba
import pytest

from components.common import text
from components.common.text import Tokenizer, detect_corpus_language, detect_language


class TestDetectLanguage:
    def test_english_and_chinese(self):
        assert detect_language("How does hybrid retrieval work?") == "en"
        assert detect_language("混合检索是如何工作的？") == "zh"

    def test_threshold_is_thirty_percent_of_letters(self):
        assert detect_language("北京上 abcdefg") == "zh"  # 3 Han of 10 letters
        assert detect_language("北京 abcdefg") == "en"  # 2 of 9
        assert detect_language("北京 abcdefg 1234567890 !!!") == "en"  # digits and punctuation do not count

    def test_text_without_letters_is_english(self):
        assert detect_language("") == "en"
        assert detect_language("1234 ?!") == "en"

    def test_latin_letters_with_accents_count_as_latin(self):
        assert detect_language("北京上 éèàüöçñ") == "zh"
        assert detect_language("北京 éèàüöçñ") == "en"


class TestDetectCorpusLanguage:
    def test_single_language_corpora(self):
        assert detect_corpus_language(["hello world"] * 10) == "en"
        assert detect_corpus_language(["你好世界"] * 10) == "zh"

    def test_mixed_when_each_language_has_twenty_percent(self):
        assert detect_corpus_language(["hello world"] * 8 + ["你好世界"] * 2) == "mixed"
        assert detect_corpus_language(["hello world"] * 9 + ["你好世界"] * 1) == "en"
        assert detect_corpus_language(["hello world"] * 1 + ["你好世界"] * 9) == "zh"

    def test_texts_without_letters_are_ignored(self):
        assert detect_corpus_language(["你好世界", "123", "", "!!"]) == "zh"

    def test_empty_corpus_is_english(self):
        assert detect_corpus_language([]) == "en"

    def test_accepts_any_iterable(self):
        assert detect_corpus_language(t for t in ["你好", "世界"]) == "zh"

    def test_sequences_are_sampled_evenly(self):
        # Sorted by language: taking only the first texts would miss the Chinese half.
        corpus = ["hello world"] * 50_000 + ["你好世界"] * 50_000
        assert detect_corpus_language(corpus) == "mixed"

    def test_iterators_are_read_only_up_to_the_sample_size(self):
        consumed = 0

        def texts():
            nonlocal consumed
            while True:
                consumed += 1
                yield "hello"

        assert detect_corpus_language(texts()) == "en"
        assert consumed <= text.CORPUS_SAMPLE_SIZE + 1


class TestTokenizer:
    def test_english_words_lowercased_without_punctuation(self):
        assert Tokenizer().tokenize("Hello, World! GPU-2024 isn't snake_case.") == [
            "hello",
            "world",
            "gpu",
            "2024",
            "isn",
            "t",
            "snake",
            "case",
        ]

    def test_lowercase_can_be_disabled(self):
        assert Tokenizer(lowercase=False).tokenize("Hello World") == ["Hello", "World"]

    def test_non_ascii_letters_are_word_characters(self):
        assert Tokenizer().tokenize("Café Ñandú") == ["café", "ñandú"]

    def test_chinese_uses_jieba_search_mode(self):
        tokens = Tokenizer(language="zh").tokenize("我们在北京大学学习。")
        assert tokens == list(jieba.cut_for_search("我们在北京大学学习"))
        assert {"北京", "北京大学"} <= set(tokens)
        assert "。" not in tokens

    def test_mixed_text_splits_scripts(self):
        tokens = Tokenizer().tokenize("BM25检索 works well，尤其是中文")
        assert tokens[0] == "bm25"
        assert "works" in tokens and "well" in tokens
        assert "检索" in tokens and "中文" in tokens
        assert all(token.strip() and token not in "，。" for token in tokens)

    def test_english_mode_never_calls_jieba(self, monkeypatch):
        monkeypatch.setattr(text.jieba, "cut_for_search", _fail)
        assert Tokenizer(language="en").tokenize("hello 北京大学") == ["hello", "北京大学"]

    def test_auto_mode_skips_jieba_for_text_without_han(self, monkeypatch):
        monkeypatch.setattr(text.jieba, "cut_for_search", _fail)
        assert Tokenizer(language="auto").tokenize("plain English") == ["plain", "english"]

    def test_english_stopwords(self):
        assert Tokenizer(stopwords="en").tokenize("The cat is on the mat") == ["cat", "mat"]
        assert Tokenizer(stopwords="en", lowercase=False).tokenize("The Cat") == ["Cat"]

    def test_empty_and_punctuation_only(self):
        assert Tokenizer().tokenize("") == []
        assert Tokenizer().tokenize(" ?!。， ...") == []

    def test_tokenize_many(self):
        assert Tokenizer().tokenize_many(["a b", "", "C"]) == [["a", "b"], [], ["c"]]

    def test_deterministic_and_picklable(self):
        tokenizer = Tokenizer(language="mixed", stopwords="en")
        sample = "The 自然语言处理 pipeline for BM25 检索"
        clone = pickle.loads(pickle.dumps(tokenizer))
        assert clone.tokenize(sample) == tokenizer.tokenize(sample) == tokenizer.tokenize(sample)
        assert clone.identity() == tokenizer.identity()

    def test_identity(self):
        assert Tokenizer(language="zh", stopwords="en").identity() == {
            "name": text.TOKENIZER_NAME,
            "language": "zh",
            "lowercase": "true",
            "stopwords": "en",
            "jieba": jieba.__version__,
            "code": text.SOURCE_DIGEST,
        }
        assert Tokenizer(language="en").identity()["jieba"] == "unused"
        assert all(isinstance(value, str) for value in Tokenizer().identity().values())

    def test_invalid_settings_name_the_parameter(self):
        with pytest.raises(ValueError, match="language"):
            Tokenizer(language="fr")
        with pytest.raises(ValueError, match="stopwords"):
            Tokenizer(stopwords="zh")


def _fail(*args, **kwargs):
    raise AssertionError("jieba must not be called")
