"""The memory block does not recall what the request's history already
holds: the previous question of the same conversation is left out, while the
same words said in another conversation are still recalled."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.e2e

OLD = "我的自行车停在图书馆门口了"
ASKED = "你还记得我的自行车停在哪里吗？"
AGAIN = "我的自行车到底停在哪里？"


@pytest.fixture(scope="module")
def bot(bot_factory):
    with bot_factory("request-history", {"write_policy": {"mode": "auto"}}) as b:
        yield b


def block_text(bot, said: str, since: int) -> str:
    blocks = bot.memory_blocks(bot.turn_request(said, since))
    assert len(blocks) <= 1, blocks
    return blocks[0]["text"] if blocks else ""


def said_and_recorded(bot, text: str, user: str, session: str) -> int:
    """Say ``text``; the mark of its request. Waits until the turn is recorded."""
    since = bot.mark()
    assert bot.chat(text, user, session) == f"ECHO: {text}"
    bot.wait_for(lambda: any(e["content"].get("text") == text for e in bot.events(user)),
                 what=f"{text!r} recorded")
    return since


def test_the_previous_question_of_the_same_conversation_is_not_in_the_block(bot):
    said_and_recorded(bot, OLD, "eve", "bike-old")
    since = said_and_recorded(bot, ASKED, "eve", "bike-now")
    first = block_text(bot, ASKED, since)
    assert OLD in first, bot.diag(f"the other conversation's turn should be recalled: {first!r}")

    since = said_and_recorded(bot, AGAIN, "eve", "bike-now")
    body = bot.turn_request(AGAIN, since)
    history = [m for m in body["messages"][:-1] if m.get("role") in ("user", "assistant")]
    assert len(history) == 2, body["messages"]  # AstrBot sent the previous question and its answer
    again = block_text(bot, AGAIN, since)
    assert ASKED not in again, bot.diag(f"the history's question was recalled again: {again!r}")
    assert f"ECHO: {ASKED}" not in again, again
    assert OLD in again, bot.diag(f"a turn the history lacks must still be recalled: {again!r}")

    # The same question is recalled where the request's history does not hold it.
    since = bot.mark()
    assert bot.chat(AGAIN, "eve", "bike-elsewhere") == f"ECHO: {AGAIN}"
    elsewhere = block_text(bot, AGAIN, since)
    assert ASKED in elsewhere, bot.diag(f"another conversation should recall the question: {elsewhere!r}")
    bot.assert_log_clean()
