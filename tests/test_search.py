"""The dashboard's memory search (``GET items?q=…``): a query shorter than a
CJK bigram (one character) finds the facts holding it, a lone character
beside other words is a prefix, and ``search=meaning`` ranks by the
embedding when an embedding provider is configured."""

from __future__ import annotations

import hashlib

import numpy as np

from astrbot_plugin_ltm.operating.meaning_search import unrelated_ceiling
from tests.helpers import FailingEmbedder

TOPICS = ("cat", "猫", "feline", "jazz", "music")


class TopicEmbedder:
    """A text's vector is its topic: cats (cat, 猫, feline) or music (jazz,
    music); anything else is a third direction."""

    model_id = "topics-3"

    async def embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), 3), np.float32)
        for i, text in enumerate(texts):
            lower = text.lower()
            if any(word in lower for word in TOPICS[:3]):
                out[i, 0] = 1.0
            elif any(word in lower for word in TOPICS[3:]):
                out[i, 1] = 1.0
            else:
                out[i, 2] = 1.0
        return out


class SpreadEmbedder(TopicEmbedder):
    """As TopicEmbedder, but a text on no topic points its own way (as a
    real model puts unrelated texts apart), and a topic's texts differ a
    little: the model's cutoff can be measured."""

    model_id = "topics-spread"

    async def embed(self, texts: list[str]) -> np.ndarray:
        topics = await super().embed(texts)
        out = np.zeros((len(texts), 35), np.float32)
        for i, text in enumerate(texts):
            noise = np.random.default_rng(int(hashlib.md5(text.encode()).hexdigest()[:8], 16)).normal(size=32)
            noise /= np.linalg.norm(noise)
            out[i, :3] = topics[i] * (0.0 if topics[i, 2] else 0.9)
            out[i, 3:] = noise * (1.0 if topics[i, 2] else 0.3)
        return out


class MissingEmbedder:
    """AstrBot's embedder when no embedding provider is configured."""

    model_id = ""

    async def embed(self, texts: list[str]) -> np.ndarray:
        raise LookupError("no embedding provider")


def facts(data: dict) -> list[str]:
    return [i["fact"] for i in data["items"]]


async def _remember(api, origin, *said: tuple[str, str]) -> None:
    for user, fact in said:
        await api.ltm.engine.remember(origin(user), fact)


async def test_one_chinese_character_finds_the_facts_that_hold_it(make_api, origin) -> None:
    api = await make_api({"write_policy": {"mode": "auto"}})
    await _remember(api, origin, ("alice", "用户养了一只叫咪咪的猫"), ("alice", "用户的猫喜欢晒太阳"),
                    ("bob", "用户喜欢喝茶"))
    found = await api.ok("list_items", {"q": "猫"})
    assert sorted(facts(found)) == ["用户养了一只叫咪咪的猫", "用户的猫喜欢晒太阳"] and found["total"] == 2
    assert facts(await api.ok("list_items", {"q": "茶", "scope": "user", "scope_id": "qq:bob"})) == ["用户喜欢喝茶"]
    assert facts(await api.ok("list_items", {"q": "茶", "scope": "user", "scope_id": "qq:alice"})) == []
    # paged like any list
    page = await api.ok("list_items", {"q": "猫", "page": 2, "page_size": 1})
    assert len(page["items"]) == 1 and page["total"] == 2


async def test_a_lone_character_beside_other_words_finds_the_bigrams_it_starts(make_api, origin) -> None:
    api = await make_api({"write_policy": {"mode": "auto"}})
    await _remember(api, origin, ("alice", "用户的猫喜欢晒太阳"), ("alice", "Alice likes jazz"),
                    ("alice", "Alice lives in Paris"))
    assert sorted(facts(await api.ok("list_items", {"q": "猫 jazz"}))) == ["Alice likes jazz", "用户的猫喜欢晒太阳"]


async def test_words_the_keyword_rows_drop_are_found_as_they_are_written(make_api, origin) -> None:
    api = await make_api({"write_policy": {"mode": "auto"}})
    await _remember(api, origin, ("alice", "Alice owns a Xbox"), ("alice", "Alice lives in Paris"))
    assert facts(await api.ok("list_items", {"q": "x"})) == ["Alice owns a Xbox"]
    assert facts(await api.ok("list_items", {"q": "in"})) == ["Alice lives in Paris"]  # a stop word, literally
    assert "search" in await api.err(400, "list_items", {"q": "!?"})


async def test_multi_word_search_still_ranks_through_the_keyword_rows(make_api, origin) -> None:
    api = await make_api({"write_policy": {"mode": "auto"}})
    await _remember(api, origin, ("alice", "Alice likes jazz"), ("alice", "Alice lives in Paris"),
                    ("alice", "用户养了一只叫咪咪的猫"))
    assert sorted(facts(await api.ok("list_items", {"q": "Paris jazz"}))) == ["Alice likes jazz",
                                                                           "Alice lives in Paris"]
    assert facts(await api.ok("list_items", {"q": "lives Paris"}))[0] == "Alice lives in Paris"
    assert facts(await api.ok("list_items", {"q": "咪咪"})) == ["用户养了一只叫咪咪的猫"]


async def test_search_by_meaning_finds_a_fact_that_shares_no_word_with_the_query(make_api, origin) -> None:
    api = await make_api({"write_policy": {"mode": "auto"}}, embedder=TopicEmbedder())
    await _remember(api, origin, ("alice", "用户养了一只叫咪咪的猫"), ("alice", "Alice likes jazz"),
                    ("bob", "Bob lives in Paris"))
    await api.ltm.engine.worker.fill_vectors()
    assert facts(await api.ok("list_items", {"q": "feline pets"})) == []  # no shared word
    found = await api.ok("list_items", {"q": "feline pets", "search": "meaning"})
    assert found["search"] == "meaning" and facts(found)[0] == "用户养了一只叫咪咪的猫"
    assert found["items"][0]["similarity"] > 0.99 and found["items"][-1]["similarity"] < 0.5
    # the filters apply as in any list
    only_bob = await api.ok("list_items", {"q": "feline pets", "search": "meaning", "scope": "user",
                                           "scope_id": "qq:bob"})
    assert facts(only_bob) == ["Bob lives in Paris"]
    assert facts(await api.ok("list_items", {"q": "feline", "search": "meaning", "status": "shadow"})) == []


async def test_search_by_meaning_finds_only_what_is_nearer_than_unrelated_texts(make_api, origin) -> None:
    """Not every memory ranked: only those nearer the query than the model
    puts two texts with nothing in common."""
    api = await make_api({"write_policy": {"mode": "auto"}}, embedder=SpreadEmbedder())
    await _remember(api, origin, ("alice", "用户养了一只叫咪咪的猫"), ("alice", "Alice likes jazz"),
                    ("bob", "Bob lives in Paris"), ("bob", "Bob owns a feline called Tom"))
    await api.ltm.engine.worker.fill_vectors()
    found = await api.ok("list_items", {"q": "feline pets", "search": "meaning"})
    assert sorted(facts(found)) == ["Bob owns a feline called Tom", "用户养了一只叫咪咪的猫"]
    assert found["total"] == 2
    assert facts(await api.ok("list_items", {"q": "the weather tomorrow", "search": "meaning"})) == []


def test_the_cutoff_is_how_close_the_model_puts_unrelated_texts() -> None:
    apart = np.eye(4, dtype=np.float32)
    assert unrelated_ceiling(apart) == 0.0
    leaning = np.array([[1, 0], [0.6, 0.8], [0, 1]], np.float32)
    assert abs(unrelated_ceiling(leaning) - 0.8) < 1e-6  # the closest pair
    assert unrelated_ceiling(np.ones((3, 4), np.float32)) == -1.0  # tells nothing apart: no cutoff


async def test_search_by_meaning_without_an_embedding_provider_is_refused_clearly(make_api, origin) -> None:
    api = await make_api({"write_policy": {"mode": "auto"}})
    assert "embedding provider" in await api.err(400, "list_items", {"q": "cats", "search": "meaning"})
    missing = await make_api({"write_policy": {"mode": "auto"}}, embedder=MissingEmbedder())
    assert "embedding provider" in await missing.err(400, "list_items", {"q": "cats", "search": "meaning"})
    broken = await make_api({"write_policy": {"mode": "auto"}}, embedder=FailingEmbedder())
    assert "did not answer" in await broken.err(503, "list_items", {"q": "cats", "search": "meaning"})
    assert "search" in await api.err(400, "list_items", {"q": "", "search": "meaning"})
    assert "search" in await api.err(400, "list_items", {"q": "cats", "search": "vibes"})
