"""The /ltm chat commands (text in, text out over the engine)."""

from __future__ import annotations

import pytest

from astrbot_plugin_ltm.commands import HELP, Commands
from astrbot_plugin_ltm.models import MemoryItem


@pytest.fixture
async def cmd(ltm):
    return Commands(ltm.engine)


async def test_status(ltm, cmd, origin):
    a = origin("alice")
    assert await cmd.status(a) == "I don't keep any memories about you yet."
    await cmd.remember(a, "I like green tea")
    await ltm.record(a, "I live in Paris", "Nice.")
    text = await cmd.status(a)
    assert "user qq:alice: 1 active; 2 message(s) waiting for extraction" in text
    assert text.endswith("Write mode: auto.")
    # another user sees nothing of it
    assert await cmd.status(origin("bob")) == "I don't keep any memories about you yet."


async def test_list(ltm, cmd, origin):
    a = origin("alice")
    assert await cmd.list(a) == "I don't remember anything about you."
    await cmd.remember(a, "I like green tea")
    await ltm.turn(a, "maybe I like jazz", "OK.", {"fact": "Alice might like jazz", "confidence": 0.5})
    item = await ltm.item(MemoryItem.fact == "Alice like green tea")
    text = await cmd.list(a)
    lines = text.split("\n")
    assert f"{item.memory_id[:8]} [preference] Alice like green tea" in lines
    assert any(line.endswith("[preference] Alice might like jazz (shadow)") for line in lines)
    assert await cmd.list(origin("bob")) == "I don't remember anything about you."


async def test_list_is_capped_and_says_how_many_more(make_ltm, origin):
    ltm = await make_ltm({"write_policy": {"mode": "auto", "max_writes_per_session": 100, "max_writes_per_hour": 100}})
    cmd = Commands(ltm.engine)
    a = origin("alice")
    for n in range(23):
        await ltm.engine.remember(a, f"fact number {n} is {'x' * n}")
    lines = (await cmd.list(a)).split("\n")
    assert len(lines) == 21 and lines[-1] == "… and 3 more"


async def test_remember(ltm, cmd, origin):
    a = origin("alice")
    reply = await cmd.remember(a, "I like green tea")
    item = await ltm.item()
    assert reply == f"Remembered ({item.memory_id[:8]}): Alice like green tea."
    assert item.status == "active"
    assert await cmd.remember(a, "   ") == "Usage: /ltm remember <fact>"
    assert len(await ltm.items()) == 1
    assert ltm.gateway.calls == []


async def test_remember_in_shadow_or_manual_mode_says_it_is_not_active(make_ltm, origin):
    ltm = await make_ltm({"write_policy": {"mode": "manual"}})
    reply = await Commands(ltm.engine).remember(origin("alice"), "I like green tea")
    assert "shadow" in reply and "approves" in reply
    assert (await ltm.item()).awaiting_approval


async def test_remember_refused_by_policy_says_why(make_ltm, origin):
    ltm = await make_ltm({"write_policy": {"mode": "auto", "allowed_types": ["profile"]}})
    reply = await Commands(ltm.engine).remember(origin("alice"), "I like green tea")
    assert reply.startswith("Not stored:") and "allowed_types" in reply
    assert await ltm.items() == []


async def test_forget(ltm, cmd, origin):
    a, b = origin("alice"), origin("bob")
    await cmd.remember(a, "I like green tea")
    await cmd.remember(b, "I like coffee")
    mine = await ltm.item(MemoryItem.scope_id == "qq:alice")
    theirs = await ltm.item(MemoryItem.scope_id == "qq:bob")

    # not someone else's
    reply = await cmd.forget(a, theirs.memory_id[:8])
    assert "no memory" in reply
    assert len(await ltm.items()) == 2
    # too short to be safe
    assert "at least 4" in await cmd.forget(a, mine.memory_id[:3])

    assert await cmd.forget(a, mine.memory_id[:8]) == "Forgotten: Alice like green tea"
    assert [i.memory_id for i in await ltm.items()] == [theirs.memory_id]
    (tomb,) = await ltm.tombstones()
    assert tomb.fact_key == mine.fact_key and tomb.actor == "user:alice"
    assert "no memory" in await cmd.forget(a, mine.memory_id[:8])


async def test_forget_all_needs_confirmation(ltm, cmd, origin):
    a, b = origin("alice"), origin("bob")
    assert await cmd.forget_all(a, "") == "I don't remember anything about you."
    for fact in ("I like green tea", "I live in Paris", "I am a nurse"):
        await cmd.remember(a, fact)
    await cmd.remember(b, "I like coffee")

    # "confirm" before being asked deletes nothing: it asks
    reply = await cmd.forget_all(a, "confirm")
    assert "deletes all 3 memories" in reply and "confirm" in reply
    assert len(await ltm.items()) == 4

    # asked, but the confirmation comes too late: asks again
    ltm.clock.advance(minutes=3)
    assert "deletes all 3" in await cmd.forget_all(a, "confirm")
    assert len(await ltm.items()) == 4

    # another user's confirmation does not count for alice
    assert "deletes all 1" in await cmd.forget_all(b, "")

    ltm.clock.advance(seconds=30)
    assert await cmd.forget_all(a, "confirm") == "Deleted 3 memories."
    assert [i.scope_id for i in await ltm.items()] == ["qq:bob"]
    assert len(await ltm.tombstones()) == 3
    # the confirmation is used up
    assert await cmd.forget_all(a, "confirm") == "I don't remember anything about you."


async def test_operator_commands_are_refused_to_users(make_ltm, origin):
    ltm = await make_ltm({"write_policy": {"mode": "manual"}})
    cmd = Commands(ltm.engine)
    a = origin("alice")
    await cmd.remember(a, "I like green tea")
    item = await ltm.item()
    refused = "Only an operator can review memories."
    assert await cmd.pending(a) == refused
    assert await cmd.review(a, item.memory_id[:8], "approve") == refused
    assert await cmd.review(a, item.memory_id[:8], "reject") == refused
    item = await ltm.item()
    assert item.awaiting_approval and item.status == "shadow"
    assert not [r for r in await ltm.audit() if r.action in ("approve", "reject")]


async def test_pending_approve_reject(make_ltm, origin):
    ltm = await make_ltm({"write_policy": {"mode": "manual"}})
    cmd = Commands(ltm.engine)
    op = origin("root", admin=True)
    assert await cmd.pending(op) == "No memories await approval."
    await cmd.remember(origin("alice"), "I like green tea")
    await cmd.remember(origin("bob"), "I like coffee")
    tea = await ltm.item(MemoryItem.scope_id == "qq:alice")
    coffee = await ltm.item(MemoryItem.scope_id == "qq:bob")

    text = await cmd.pending(op)
    assert text.startswith("2 awaiting approval:")
    assert f"{tea.memory_id[:8]} user:qq:alice [preference] Alice like green tea" in text

    assert await cmd.review(op, tea.memory_id[:8], "approve") == "Approved: Alice like green tea"
    tea = await ltm.item(MemoryItem.scope_id == "qq:alice")
    assert tea.status == "active" and not tea.awaiting_approval
    assert await ltm.block(origin("alice"), "tea")
    (approve,) = [r for r in await ltm.audit() if r.action == "approve"]
    assert approve.actor == "operator:root"

    assert await cmd.review(op, coffee.memory_id[:8], "reject") == "Rejected: Bob like coffee"
    assert await ltm.items(MemoryItem.scope_id == "qq:bob") == []
    assert [t.scope_id for t in await ltm.tombstones()] == ["qq:bob"]
    assert await cmd.pending(op) == "No memories await approval."
    assert "no memory" in await cmd.review(op, "ffffffff", "approve")


def test_help_lists_every_command():
    for name in ("status", "list", "remember", "forget", "forget-all", "pending", "approve", "reject"):
        assert f"/ltm {name}" in HELP


async def test_what_a_user_remembers_in_a_group_they_can_list_and_forget(ltm, cmd, origin):
    # /ltm remember answers with an id; /ltm list and /ltm forget in the same
    # chat must know it, or the user cannot take back their own words.
    bob = origin("bob", group="g1")
    reply = await cmd.remember(bob, "I am vegetarian")
    assert reply.startswith("Remembered (")
    short_id = reply[len("Remembered ("):].split(")")[0]
    assert short_id in await cmd.list(bob)
    assert (await cmd.forget(bob, short_id)).startswith("Forgotten")
    assert await ltm.items() == []
