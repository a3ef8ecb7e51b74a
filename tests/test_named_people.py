"""A question naming a person who spoke in the scope ranks that person's
own turns (recalling/people.py, docs/decisions.md#d124)."""

from __future__ import annotations

from datetime import timedelta

from astrbot_plugin_ltm.recalling.people import named_speakers, names_speaker, their_turns
from astrbot_plugin_ltm.text import query_tokens
from tests.helpers import START, event_row


def asked(question: str) -> frozenset[str]:
    return frozenset(query_tokens(question))


def said_by(n: int, name: str, text: str = "something", role: str = "user"):
    return event_row(n, text, sender_id=name.lower(), sender_name=name, role=role)


def test_a_name_is_named_by_all_its_words():
    assert names_speaker(asked("What trips has Melanie taken?"), "Melanie")
    assert names_speaker(asked("What did Jane Doe paint?"), "Jane Doe")
    assert not names_speaker(asked("What did Jane paint?"), "Jane Doe")
    assert names_speaker(asked("小明喜欢什么运动？"), "小明")
    assert not names_speaker(asked("What did she paint?"), None)


def test_the_named_persons_turns_come_best_match_first():
    turns = {1: said_by(1, "Bob"), 2: said_by(2, "Alice"), 3: said_by(3, "Alice"), 4: said_by(4, "Bob")}
    fused = {1: 0.5, 2: 0.1, 3: 0.3}
    named = named_speakers(asked("What trips has Alice taken?"), turns)
    assert named == {"Alice"}
    assert their_turns(named, fused, turns) == [3, 2]


def test_a_question_naming_everyone_who_spoke_or_nobody_lifts_no_one():
    turns = {1: said_by(1, "Bob"), 2: said_by(2, "Alice")}
    assert named_speakers(asked("What have Alice and Bob both painted?"), turns) == set()
    assert named_speakers(asked("What did we paint?"), turns) == set()
    # One person with the bot: the name tells no turn from another.
    alone = {1: said_by(1, "Alice"), 2: said_by(2, "Alice", role="assistant")}
    assert named_speakers(asked("What did Alice paint?"), alone) == set()


def test_the_bots_replies_are_never_the_named_persons():
    turns = {1: said_by(1, "Bob"), 2: said_by(2, "Alice"), 3: said_by(3, "Alice", role="assistant")}
    assert their_turns(named_speakers(asked("What did Alice paint?"), turns), {}, turns) == [2]


async def test_a_question_about_a_person_reaches_their_turn_over_turns_that_address_them(make_ltm, origin):
    """Bob's turns say "Alice" and "trip" (short, so they match best by
    keywords); Alice's own turn says only "trip". Asked about Alice's trips,
    her turn is read."""
    ltm = await make_ltm({"write_policy": {"mode": "auto"},
                          "identity": {"user_scope_strategy": "unified_msg_origin"},
                          "read_policy": {"max_events": 2}})
    umo = "qq:GroupMessage:g1"
    alice, bob = origin("alice", name="Alice", umo=umo), origin("bob", name="Bob", umo=umo)
    ltm.clock.now = START
    await ltm.record(alice, "Last month I went on a long trip to the Alps with my sister; we hiked every day.")
    for n in range(4):
        ltm.clock.now = START + timedelta(days=n + 1)
        await ltm.record(bob, f"Safe trip, Alice! Send me photo number {n}.")
    ltm.clock.now = START + timedelta(days=30)
    block = await ltm.block(alice, "What trips has Alice taken?")
    assert any("Alps" in e.fact for e in block.events)
