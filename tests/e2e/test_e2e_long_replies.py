"""Long replies against a real AstrBot: the fake model answers a request for
restaurants with a list of eight (and its extraction makes only an unsure
guess of the request, as a real model may); in a new conversation, a
question about one in the middle of the list gets that part of the reply in
its block (docs/decisions.md#d80, #d81)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def bot(bot_factory):
    config = {"write_policy": {"mode": "auto"}, "extraction": {"timeout_seconds": 5.0}}
    with bot_factory("longreplies", config) as b:
        yield b


def _recalled(bot, user: str, ask: str, question: str, detail: str, name: str) -> None:
    reply = bot.chat(ask, user, f"{user}-food-1")
    assert name in reply and reply.index(name) > 100, bot.diag(f"the fake model's list is not long: {reply!r}")
    # the turn is recorded (and read by extraction) before the next conversation starts
    bot.wait_for(lambda: (events := bot.events(user)) and len(events) >= 2
                 and all(e["extraction_status"] != "pending" for e in events), what=f"{user}'s turn recorded")
    # extraction made only an unsure guess of the request (as a real model
    # may): kept in shadow, and no longer hiding the request or the reply
    (guess,) = bot.items(user)
    assert guess["status"] == "shadow" and not guess["awaiting_approval"], guess
    since = bot.mark()
    assert bot.chat(question, user, f"{user}-food-2") == f"ECHO: {question}"
    body = bot.turn_request(question, since)
    blocks = bot.memory_blocks(body)
    assert blocks, bot.diag(f"no memory block for {question!r}: {body['messages']}")
    (block,) = blocks
    said = [line for line in block["lines"] if line.startswith("- bot (you): ")]
    assert any(name in line and detail in line for line in said), block["text"]
    # a new conversation: no history, so only the memory block can have brought it
    assert [m["role"] for m in body["messages"]] == ["system", "user"], body["messages"]


def test_a_restaurant_from_the_middle_of_a_long_reply_is_recalled_in_a_new_conversation(bot):
    _recalled(bot, "zmt", "能推荐几家杭州的餐厅吗？", "你之前推荐的那家做西湖醋鱼的餐厅叫什么名字？",
              "西湖醋鱼", "楼外楼")
    bot.assert_log_clean()


def test_a_detail_from_the_middle_of_a_long_english_reply_is_recalled_in_a_new_conversation(bot):
    _recalled(bot, "alice", "Can you recommend some restaurants in Lisbon?",
              "What was the restaurant you recommended for garlic prawns called?", "garlic prawns",
              "Cervejaria Ramiro")
    bot.assert_log_clean()
