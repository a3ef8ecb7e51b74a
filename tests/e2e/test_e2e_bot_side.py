"""The bot's side of the conversation against a real AstrBot: what the bot
(the fake model) recommended in one conversation is in the request of a
new one that asks about it."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def bot(bot_factory):
    config = {"write_policy": {"mode": "auto"}, "extraction": {"timeout_seconds": 5.0}}
    with bot_factory("botside", config) as b:
        yield b


def test_a_recommendation_the_bot_made_is_recalled_in_a_new_conversation(bot):
    reply = bot.chat("我叫张曼婷，最近想读书，你能给我推荐一本书吗？", "zmt", "book-1")
    assert "《小王子》" in reply, bot.diag(f"the fake model recommended nothing: {reply!r}")
    # the bot's reply is recorded as the bot's, and extraction remembers its act as the bot's
    (episode,) = bot.wait_extracted("zmt", ["推荐了《小王子》"], "active")
    assert episode["type"] == "episode" and episode["fact"].startswith("机器人"), episode
    events = {e["event_id"]: e for e in bot.events("zmt")}
    evidence = bot.query("SELECT event_id FROM ltm_evidence WHERE memory_id = ?", (episode["memory_id"],))
    assert [events[r["event_id"]]["source_role"] for r in evidence] == ["assistant"], evidence

    since = bot.mark()
    question = "你上次推荐给我的书叫什么？"
    assert bot.chat(question, "zmt", "book-2") == f"ECHO: {question}"
    body = bot.turn_request(question, since)
    (block,) = bot.memory_blocks(body)
    assert "《小王子》" in block["text"], bot.diag(f"the recommendation is not in the block: {block['text']}")
    said = [line for line in block["lines"] if "《小王子》" in line]
    # said by the bot, as the bot's: a bot-side episode, or the bot's own labelled line
    assert said and all("机器人" in line or line.startswith("- bot (you): ") for line in said), block["text"]
    # a new conversation: no history, so only the memory block can have brought it
    assert [m["role"] for m in body["messages"]] == ["system", "user"], body["messages"]
    bot.assert_log_clean()
