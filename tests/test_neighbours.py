"""A turn found through the one beside it (recalling/neighbours.py): what the message
matches is often the turn before or after the one that answers it."""

from __future__ import annotations

SHOWN = "Look what I made last weekend: a watercolour of the harbour"
ANSWER = "Yes! At the stadium in Lisbon, it was unforgettable"


async def said(ltm, a, user: str, bot: str = "Nice.") -> None:
    await ltm.record(a, user, bot)
    ltm.clock.advance(minutes=1)


async def test_a_turn_is_recalled_through_the_matched_turn_after_it(make_ltm, origin):
    ltm = await make_ltm({"write_policy": {"mode": "auto"}})
    a = origin("alice")
    # The reply lends the words the shown turn lacks; a turn is indexed with the one before it, not after.
    await said(ltm, a, SHOWN, "Wow, a painting! The colours are lovely")
    await said(ltm, a, "My sister plays the violin")
    block = await ltm.block(a, "Tell me about my painting")
    assert "Wow, a painting!" in block.text  # the matched turn
    assert SHOWN in block.text  # found only through it: it shares no word with the message


async def test_a_turn_said_on_another_day_is_no_neighbour(make_ltm, origin):
    ltm = await make_ltm({"write_policy": {"mode": "auto"}})
    a = origin("alice")
    await said(ltm, a, "I finally went to a concert on Saturday", "Did you see Coldplay live?")
    ltm.clock.advance(days=2)
    await said(ltm, a, ANSWER)
    block = await ltm.block(a, "Where did I see Coldplay?")
    assert "Did you see Coldplay live?" in block.text
    assert ANSWER not in block.text

