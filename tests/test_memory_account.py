"""bench.memory_account meters the text caches with what they hold."""

from __future__ import annotations

import functools

import pytest

from bench.memory_account import lru_cache_bytes


@pytest.mark.parametrize("maxsize", [1000, None], ids=["bounded", "unbounded"])
def test_a_text_cache_is_metered_with_its_values_not_only_its_keys(maxsize):
    @functools.lru_cache(maxsize=maxsize)
    def sentence(key: str) -> str:
        return "a sentence of the cache, kilobytes long " * 25 + key

    empty = lru_cache_bytes(sentence)
    for i in range(500):
        sentence(f"key {i}")
    held = lru_cache_bytes(sentence) - empty
    assert 500 * 1000 < held < 500 * 1500  # 500 values of ~1 KB, their short keys and the links
