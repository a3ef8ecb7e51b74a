"""``manual`` mode queues memories until an operator approves them
with the plugin's own chat command."""

from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.e2e

QUESTION = "What do you know about me?"


@pytest.fixture(scope="module")
def bot(bot_factory):
    with bot_factory("manual", {"write_policy": {"mode": "manual"}}) as b:
        yield b


def _block_facts(bot, session: str) -> list[str]:
    since = bot.mark()
    assert bot.chat(QUESTION, "alice", session) == f"ECHO: {QUESTION}"
    blocks = bot.memory_blocks(bot.turn_request(QUESTION, since))
    assert len(blocks) <= 1, blocks
    return [f.get("fact") for f in blocks[0]["facts"]] if blocks else []


def test_manual_mode_injects_only_after_an_admin_approves_with_a_command(bot):
    said = "My name is Alice and I live in Paris"
    assert bot.chat(said, "alice", "t3-first") == f"ECHO: {said}"
    name, city = bot.wait_extracted("alice", ["name is Alice", "lives in Paris"], "shadow")
    assert name["awaiting_approval"] and city["awaiting_approval"], (name, city)

    # Before approval: not injected.
    assert _block_facts(bot, "t3-before") == []

    # The user cannot approve their own memories (the command needs an admin).
    denied = bot.chat(f"/ltm approve {city['memory_id'][:8]}", "alice", "t3-user-cmd")
    assert not denied.startswith("Approved"), denied
    assert all(i["status"] == "shadow" and i["awaiting_approval"] for i in bot.items("alice")), bot.items("alice")

    # The admin lists the queue with the plugin's command ...
    pending = bot.admin_chat("/ltm pending", "t3-admin")
    shown = set(re.findall(r"\b[0-9a-f]{8}\b", pending))
    for item in (name, city):
        assert item["memory_id"][:8] in shown and item["fact"] in pending, bot.diag(f"/ltm pending said: {pending!r}")
    city_id = city["memory_id"][:8]  # the id as the command showed it

    # ... and approves one of them.
    answer = bot.admin_chat(f"/ltm approve {city_id}", "t3-admin")
    assert answer.startswith("Approved") and city["fact"] in answer, bot.diag(f"/ltm approve said: {answer!r}")
    by_id = {i["memory_id"]: i for i in bot.items("alice")}
    assert by_id[city["memory_id"]]["status"] == "active" and not by_id[city["memory_id"]]["awaiting_approval"]
    assert by_id[name["memory_id"]]["status"] == "shadow" and by_id[name["memory_id"]]["awaiting_approval"]
    audit = bot.query("SELECT actor FROM ltm_audit WHERE memory_id=? AND action='approve'", (city["memory_id"],))
    assert len(audit) == 1 and "astrbot" in audit[0]["actor"], [tuple(r) for r in audit]

    # After approval: the approved fact is injected, the unapproved one still is not.
    assert _block_facts(bot, "t3-after") == [city["fact"]]
    bot.assert_log_clean()
