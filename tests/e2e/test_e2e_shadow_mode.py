"""``shadow`` (the default write mode) stores memories but never
injects them."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def bot(bot_factory):
    # No write_policy.mode: the schema default applies.
    with bot_factory("shadow", {}) as b:
        yield b


def test_shadow_mode_stores_facts_as_shadow_and_does_not_inject(bot):
    assert bot.get_plugin_config()["write_policy"]["mode"] == "shadow"

    said = "My name is Alice and I live in Paris"
    assert bot.chat(said, "alice", "t2-first") == f"ECHO: {said}"
    name, city = bot.wait_extracted("alice", ["name is Alice", "lives in Paris"], "shadow")
    items = bot.items("alice")
    assert len(items) == 2, items
    assert all(i["status"] == "shadow" and not i["awaiting_approval"] for i in items), items
    # Stored with their evidence: each fact links back to the recorded user message.
    user_event = next(e for e in bot.events("alice") if e["source_role"] == "user")
    for item in (name, city):
        links = bot.query("SELECT event_id FROM ltm_evidence WHERE memory_id=?", (item["memory_id"],))
        assert [r["event_id"] for r in links] == [user_event["event_id"]], links
    assert all(e["extraction_status"] == "done" for e in bot.events("alice"))

    # A new session of the same user: nothing is injected.
    since = bot.mark()
    question = "What do you know about me?"
    assert bot.chat(question, "alice", "t2-second") == f"ECHO: {question}"
    body = bot.turn_request(question, since)
    assert bot.memory_blocks(body) == [], bot.diag(f"shadow memories were injected: {bot.memory_blocks(body)}")
    dumped = json.dumps(body, ensure_ascii=False)
    assert "Paris" not in dumped and bot.HEADER not in dumped
    # ... and the turn went on to the same session's own history as usual.
    assert [m["role"] for m in body["messages"]] == ["system", "user"], body["messages"]
    bot.assert_log_clean()
