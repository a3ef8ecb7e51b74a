"""A question that names a day ("昨天…", "5月3号…", "yesterday") brings that
day's turns into the model request, in AstrBot's time zone, ahead of more
recent turns of other days."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

pytestmark = pytest.mark.e2e

ZONE = "Asia/Shanghai"
USER = "mei"


@pytest.fixture(scope="module")
def bot(bot_factory):
    config = {"write_policy": {"mode": "auto"}, "read_policy": {"max_events": 2}}
    with bot_factory("time-questions", config, astrbot_config={"timezone": ZONE}) as b:
        yield b


def move_back(bot, text: str, by: timedelta) -> None:
    """Test setup: the turn that said ``text`` was said ``by`` earlier (as if
    recorded then; SQLite is the source of truth for when a turn was said)."""
    ids = [e["id"] for e in bot.events(USER) if text in str(e["content"].get("text", ""))]
    assert ids, f"no event says {text!r}"
    db = sqlite3.connect(str(bot.db_path), timeout=10)
    try:
        with db:
            for rowid in ids:
                (created,) = db.execute("SELECT created_at FROM ltm_events WHERE id = ?", (rowid,)).fetchone()
                when = datetime.fromisoformat(created) - by
                db.execute("UPDATE ltm_events SET created_at = ? WHERE id = ?",
                           (when.strftime("%Y-%m-%d %H:%M:%S.%f"), rowid))
    finally:
        db.close()


def turns_in_request(bot, question: str, session: str) -> str:
    since = bot.mark()
    assert bot.chat(question, USER, session) == f"ECHO: {question}"
    blocks = bot.memory_blocks(bot.turn_request(question, since))
    return "\n".join(b["text"] for b in blocks)


def test_a_date_question_brings_that_days_turns(bot):
    bot.chat("我去了水族馆，看到了发光的水母。", USER, "day-one")
    bot.chat("The aquarium had a giant octopus too.", USER, "day-one")
    bot.wait_for(lambda: len(bot.events(USER)) >= 4, what="the first day's turns recorded")
    move_back(bot, "水母", timedelta(days=1))
    move_back(bot, "octopus", timedelta(days=1))
    # Today: more recent turns, on other things.
    for text in ("今天下雨了，我在家看《霸王别姬》。", "老板很严格，工作压力很大。",
                 "The train was late this morning.", "We watched the film Alien tonight."):
        bot.chat(text, USER, "day-two")
    bot.wait_for(lambda: len(bot.events(USER)) >= 12, what="today's turns recorded")
    bot.wait_for(lambda: bot.unembedded() == 0, what="every turn embedded")

    yesterday = turns_in_request(bot, "昨天我们聊了什么？", "ask-1")
    assert "水母" in yesterday and "octopus" in yesterday, bot.diag(yesterday)
    assert "霸王别姬" not in yesterday, yesterday

    day = (datetime.now(UTC).astimezone(ZoneInfo(ZONE)) - timedelta(days=1)).date()
    dated = turns_in_request(bot, f"{day.month}月{day.day}号我们聊了什么？", "ask-2")
    assert "水母" in dated, bot.diag(dated)

    english = turns_in_request(bot, "What did we talk about yesterday?", "ask-3")
    assert "octopus" in english and "the film Alien" not in english, bot.diag(english)
    bot.assert_log_clean()
