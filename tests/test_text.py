"""Text helpers shared by the write and read paths (CJK first-class)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from astrbot_plugin_ltm.recalling.tokens import EstimateCounter, default_counter, fewest_tokens, joined_count
from astrbot_plugin_ltm.text import (
    FACT_KEY_MAX_CHARS,
    MAX_SENTENCES,
    contradicts,
    fts_match_expression,
    index_text,
    is_cjk,
    normalize_fact_key,
    query_tokens,
    search_tokens,
    sentences,
    stem,
    token_set_similarity,
)


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ("Home City", "home_city"),
        ("home_city", "home_city"),
        ("  Alice's  home-city!! ", "alices_home_city"),
        ("ALICE.HOME/CITY", "alice_home_city"),
        ("小明的 住址", "小明的_住址"),
        ("小明，住址。", "小明住址"),
        ("Ｆｕｌｌｗｉｄｔｈ　Key", "fullwidth_key"),
        ("café au lait", "café_au_lait"),
        ("!!!", ""),
        ("__", ""),
    ],
)
def test_normalize_fact_key(raw, key):
    assert normalize_fact_key(raw) == key


@given(st.text())
def test_fact_key_is_bounded_and_idempotent(raw):
    key = normalize_fact_key(raw)
    assert len(key) <= FACT_KEY_MAX_CHARS
    assert normalize_fact_key(key) == key.rstrip("_")  # a cut at 128 may end on a separator
    assert " " not in key


def test_search_tokens_split_cjk_into_bigrams():
    assert search_tokens("小明住在上海") == ["小明", "明住", "住在", "在上", "上海"]
    assert search_tokens("我") == ["我"]
    assert search_tokens("Bob lives in 上海") == ["bob", "live", "in", "上海"]
    assert search_tokens("東京ラーメン") == ["東京", "京ラ", "ラー", "ーメ", "メン"]
    assert search_tokens("Hello, World!") == ["hello", "world"]
    assert index_text("小明 likes 绿茶") == "小明 like 绿茶"


def test_search_tokens_split_latin_and_cjk_written_together():
    # "我喜欢Python编程": no spaces between scripts is normal in Chinese
    assert search_tokens("Bob喜欢Python 3") == ["bob", "喜欢", "python", "3"]
    assert search_tokens("我喜欢Python编程") == ["我喜", "喜欢", "python", "编程"]


def test_query_tokens_drop_stopwords_and_repeats():
    assert query_tokens("What drink should I order for Bob?") == ["drink", "order", "bob"]
    assert query_tokens("小明住在哪里") == ["小明", "明住", "住在", "在哪", "哪里"]
    assert query_tokens("tea tea TEA") == ["tea"]
    assert query_tokens("a b c") == []
    assert len(query_tokens(" ".join(f"w{n}" for n in range(100)))) == 32


def test_english_words_are_searched_by_their_stems_and_other_tokens_as_they_are():
    assert search_tokens("books reading Painted") == ["book", "read", "paint"]
    assert search_tokens("What books has Tim read?") == ["what", "book", "has", "tim", "read"]
    # stopwords are dropped before stemming ("does" is not the stem "doe")
    assert query_tokens("What books does Tim read?") == ["book", "tim", "read"]
    assert search_tokens("café 2024 Python3 读书") == ["café", "2024", "python3", "读书"]
    assert stem("books") == stem("book") == "book"


def test_sentences_are_what_a_turn_is_searched_by():
    assert sentences("We hiked at dawn. Then I cooked noodles!") == ["We hiked at dawn.", "Then I cooked noodles!"]
    assert sentences("我们去爬山了。然后我做了面条") == ["我们去爬山了。", "然后我做了面条"]
    assert sentences("  ") == []
    # nothing long enough: the whole text
    assert sentences("Hey Tim! Thanks!") == ["Hey Tim! Thanks!"]
    # a short part is kept in the whole text, after the sentences
    said = "We're going on a trip next week. To Kyoto!"
    assert sentences(said) == ["We're going on a trip next week.", said]
    assert sentences("下周我们一起去旅行。在上海。") == ["下周我们一起去旅行。", "下周我们一起去旅行。在上海。"]
    # at most MAX_SENTENCES: the rest joins the last
    many = " ".join(f"Sentence number {n} is here." for n in range(12))
    parts = sentences(many)
    assert len(parts) == MAX_SENTENCES
    assert parts[-1].startswith("Sentence number 7") and parts[-1].endswith("11 is here.")


def test_fts_match_expression_quotes_every_token():
    assert fts_match_expression(["tea", 'a"b', "OR"]) == '"tea" OR "a""b" OR "OR"'


def test_is_cjk():
    assert all(is_cjk(c) for c in "中文かなカナ한")
    assert not any(is_cjk(c) for c in "abc123,.!é")


def test_token_set_similarity():
    assert token_set_similarity("Alice likes tea", "alice likes tea!") == 1.0
    assert token_set_similarity("", "") == 0.0
    assert 0 < token_set_similarity("Alice likes tea", "Alice likes coffee") < 1


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("Alice lives in Paris", "Alice lives in London"),
        ("Alice is 30", "Alice is 31"),
        ("小明住在上海", "小明住在北京"),
        ("Alice lives in Paris", "Alice lives in New York"),
        ("Alice's favourite drink is green tea", "Alice's favourite drink is coffee"),
        ("Alice likes cats", "Alice doesn't like cats"),
        ("Alice doesn't like cats", "Alice likes cats"),
        ("小明喜欢猫", "小明不喜欢猫"),
        ("小明今年30岁", "小明今年31岁"),
    ],
)
def test_contradictions(old, new):
    assert contradicts(old, new)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("Alice lives in Paris", "Alice lives in Paris"),
        ("Alice lives in Paris", "Alice lives in Paris, France"),
        ("Alice lives in Paris, France", "Alice lives in Paris"),
        ("小明住在上海", "小明住在上海市"),
        ("Alice works as a nurse", "Alice works as a nurse at St Mary's"),
        ("Alice loves green tea", "Alice's favourite drink is green tea"),
        ("Alice loves green tea", "Alice really enjoys drinking green tea"),
        ("Alice is 30", "Alice is 30 years old"),
    ],
)
def test_restatements_and_refinements_agree(old, new):
    assert not contradicts(old, new)


def test_the_offline_cl100k_vocabulary_loads_and_counts_as_tiktoken_does():
    """The budget is counted with cl100k: the vocabulary bpe-openai ships
    must load offline (the estimate is only a fallback for a broken install)."""
    real = default_counter()
    assert real.name == "tiktoken:cl100k_base"
    assert real.count("") == 0
    assert real.count("hello world") == 2
    assert real.count("[Long-term Memory]") == 5
    assert real.count("小明住在上海") == 7


def test_the_estimate_counts_cjk_characters_twice_and_other_text_generously():
    est = EstimateCounter()
    assert est.count("小明") == 4
    assert est.count("hello world") == 4  # max(ceil(2 × 1.5), ceil(11 / 3))


# Text as lines of the block read, and the characters that split it oddly:
# whitespace of every kind, the separators str.split() breaks at and
# cl100k does not, punctuation before line breaks, CJK, emoji, digits.
_TRICKY = st.lists(st.sampled_from(
    list("ab Z9-.:)#[]…，。小明\n\t\r\x0b\x0c\x1c\x1d\x1e\x1f\x85\xa0\u2028\u3000") + ["🍵", "'s", "  "]),
    max_size=60).map("".join)


@settings(deadline=None)
@given(st.one_of(st.text(max_size=80), _TRICKY))
def test_the_fewest_tokens_of_a_text_never_exceed_its_count(text):
    """The block skips counting a line whose fewest tokens already exceed
    the room left (docs/decisions.md#d133): the bound must hold for both
    counters, or a line that fits would be left out."""
    for counter in (default_counter(), EstimateCounter()):
        assert 0 <= fewest_tokens(counter, text) <= counter.count(text)


_LINE = st.lists(st.one_of(st.sampled_from(
    ["- ", "[said 2025-01-02]", "(confidence: 0.90)", " #12", "…", "tea", " Alice", "'s", "小明", "。", ")", "]",
     "🍵", "\u0301", "\ufe0f", "_", "²", "  ", "\t", " ", "!?", "\x1c", "\u3000", "\n", "9", "é"]),
    st.text(max_size=4)),
    max_size=12).map("".join)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(_LINE, st.sampled_from(["[Long-term Memory]\nPast notes.", "[End Memory]"])),
                min_size=1, max_size=8))
def test_a_joined_text_counts_as_its_lines_counted_apart(parts):
    """The block's whole count is made from its lines' counts (docs/decisions.md#d134):
    it must be the count of the joined text, whatever the lines hold."""
    counter = default_counter()
    assert joined_count(counter, parts, counter.count) == counter.count("\n".join(parts))


def test_an_unknown_counter_has_no_lower_bound():
    class Counter:
        name = "other"

        def count(self, text: str) -> int:
            return len(text)

    assert fewest_tokens(Counter(), "many words here") == 0


def test_chinese_bigrams_do_not_push_english_stems_out_of_their_cache():
    from astrbot_plugin_ltm import text

    search_tokens("reading books")
    cached = text._english_stem.cache_info().currsize
    search_tokens("".join(chr(0x4E00 + n) for n in range(3000)))  # ~3000 distinct bigrams
    assert text._english_stem.cache_info().currsize == cached
    assert search_tokens("reading books 读书") == ["read", "book", "读书"]
