"""A turn found through the reply after it (recalling/neighbours.py): the
person's message shares no word with the question, the bot's answer to it does."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta


def said(block) -> list[str]:
    return [e.fact for e in block.events]


async def test_a_message_is_found_through_the_reply_that_answers_it(ltm, origin):
    start = datetime(2023, 5, 1, 9, 0, tzinfo=UTC)
    ltm.clock.now = start
    await ltm.record(origin(), "I'm torn between a Les Paul and a Telecaster.",
                     "Both are great guitars to try at the music store: the first is heavier and warmer.")
    for n in range(6):  # other days, each sharing one word with the question
        ltm.clock.now = start + timedelta(days=n + 1)
        await ltm.record(origin(), f"I passed the shoe store number {n} today.")
    ltm.configure({"read_policy": {"max_events": 1}})
    ltm.clock.now = start + timedelta(days=20)
    asked = said(await ltm.block(origin(), "Which guitars did I consider at the music store?"))
    assert any("Les Paul" in s for s in asked)

