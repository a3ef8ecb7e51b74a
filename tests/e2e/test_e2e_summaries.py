"""Session summaries against a real AstrBot: a conversation that goes idle
is summarised with evidence, and the next conversation opens with "last
time we talked"."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.e2e

IDLE_MINUTES = 0.1  # six seconds of silence end a conversation


@pytest.fixture(scope="module")
def bot(bot_factory):
    config = {"write_policy": {"mode": "auto"}, "summaries": {"enable": True, "idle_minutes": IDLE_MINUTES,
                                                             "min_events": 1}}
    with bot_factory("summaries", config) as b:
        yield b


def summaries(bot, user: str) -> list[dict]:
    return [i for i in bot.items(user) if i["type"] == "summary"]


def test_an_idle_conversation_is_summarised_and_opens_the_next_one(bot):
    first = ["我想找本书读，你推荐一本吧", "我最近在学法语"]
    for text in first:
        assert bot.chat(text, "zhang", "s-books") == f"ECHO: {text}"
    (summary,) = bot.wait_for(lambda: summaries(bot, "zhang"), 60, "zhang's session summary")
    assert summary["status"] == "active" and summary["fact_key"].startswith("summary_session_"), summary
    assert all(text in summary["fact"] for text in first), summary["fact"]  # the fake model repeats the lines
    assert len(bot.requests(kind="summary")) == 1
    # every event of the conversation that says something backs it: the person's lines; the
    # fake model's replies only say them back ("ECHO: …"), kept in the archive, never summarised
    events = bot.events("zhang")
    assert {e["source_role"] for e in events} == {"user", "assistant"}
    assert all(e["withheld"] for e in events if e["source_role"] == "assistant")
    links = bot.query("SELECT e.event_id FROM ltm_summary_links sl JOIN ltm_items i ON i.id = sl.item_id "
                      "JOIN ltm_events e ON e.id = sl.event_rowid WHERE i.memory_id = ?", (summary["memory_id"],))
    assert {r["event_id"] for r in links} == {e["event_id"] for e in events if e["source_role"] == "user"}, \
        bot.diag("evidence incomplete")

    # A new conversation (the old one has been idle): its first request opens with the summary.
    since = bot.mark()
    hello = "你好，又是我"
    assert bot.chat(hello, "zhang", "s-again") == f"ECHO: {hello}"
    blocks = bot.memory_blocks(bot.turn_request(hello, since))
    assert len(blocks) == 1, bot.diag(f"expected one memory block, got {blocks}")
    lines = blocks[0]["lines"]
    assert lines[0].startswith("上次聊天（"), blocks[0]["text"]
    assert first[0] in lines[1], blocks[0]["text"]

    # The very next message continues that conversation: no "last time" again.
    since = bot.mark()
    more = "还有别的推荐吗"
    assert bot.chat(more, "zhang", "s-again") == f"ECHO: {more}"
    dumped = json.dumps(bot.memory_blocks(bot.turn_request(more, since)), ensure_ascii=False)
    assert "上次聊天" not in dumped
    bot.assert_log_clean()
