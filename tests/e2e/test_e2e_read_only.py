"""``emergency_read_only``, switched on through AstrBot's plugin
configuration API as the WebUI does, stops every write at once (no restart)
while memories are still read and injected."""

from __future__ import annotations

import time

import pytest

pytestmark = pytest.mark.e2e

QUESTION = "What do you know about me?"
SETTLE_SECONDS = 1.5  # > several extraction polls (0.3 s) and the recorder's flush


@pytest.fixture(scope="module")
def bot(bot_factory):
    with bot_factory("read-only", {"write_policy": {"mode": "auto"}}) as b:
        yield b


def _items_snapshot(bot) -> list[tuple]:
    return [tuple(r) for r in bot.query("SELECT * FROM ltm_items ORDER BY id")]


def test_emergency_read_only_via_webui_config_blocks_writes_and_keeps_reads(bot):
    said = "My name is Alice and I live in Paris"
    assert bot.chat(said, "alice", "t4-first") == f"ECHO: {said}"
    name, city = bot.wait_extracted("alice", ["name is Alice", "lives in Paris"], "active")

    pid = bot.pid
    log_start = bot.log_size()
    bot.put_plugin_config({"emergency_read_only": True})
    config = bot.get_plugin_config()
    assert config["emergency_read_only"] is True
    assert config["write_policy"]["mode"] == "auto", "keys left out of the PUT must keep their values"
    assert bot.pid == pid and bot.proc.proc.poll() is None, "AstrBot must not restart"
    # AstrBot reloaded the plugin (a new instance with the new config) before answering.
    assert bot.plugin_terminated(log_start), \
        bot.diag("the PUT did not reload the plugin")

    tables = bot.ltm_tables()
    for t in ("ltm_events", "ltm_items", "ltm_evidence", "ltm_audit", "ltm_tombstones", "ltm_items_fts",
              "ltm_schema_version"):
        assert t in tables, tables
    before = bot.ltm_counts()
    items_before = _items_snapshot(bot)

    # Reads still work: a new session gets the stored memories.
    since = bot.mark()
    assert bot.chat(QUESTION, "alice", "t4-read") == f"ECHO: {QUESTION}"
    blocks = bot.memory_blocks(bot.turn_request(QUESTION, since))
    assert len(blocks) == 1, bot.diag(f"expected one memory block while read-only, got {blocks}")
    assert {f.get("fact") for f in blocks[0]["facts"]} >= {name["fact"], city["fact"]}, blocks[0]["text"]

    # Things that would write: new facts, an explicit request, the remember
    # command, another user's first turn, a tool-less follow-up.
    for text, user, session in [
        ("My name is Alicia and I live in Berlin", "alice", "t4-read"),
        ("Please remember that I like green tea", "alice", "t4-read"),
        ("My name is Bob and I live in Oslo", "bob", "t4-bob"),
    ]:
        assert bot.chat(text, user, session) == f"ECHO: {text}"
    answer = bot.chat("/ltm remember I like coffee", "alice", "t4-read")
    assert "read-only" in answer, answer
    time.sleep(SETTLE_SECONDS)

    after = bot.ltm_counts()
    assert after == before, bot.diag(
        "rows were written while emergency_read_only was on: "
        + ", ".join(f"{t}: {before.get(t)} -> {n}" for t, n in after.items() if before.get(t) != n))
    assert _items_snapshot(bot) == items_before

    # Switching it off again (same API) lets writes resume: the check above
    # was not measuring a plugin that writes nothing anyway.
    bot.put_plugin_config({"emergency_read_only": False})
    assert bot.get_plugin_config()["emergency_read_only"] is False
    said = "My name is Bob and I live in Oslo"
    assert bot.chat(said, "bob", "t4-bob-again") == f"ECHO: {said}"
    bot.wait_extracted("bob", ["name is Bob", "lives in Oslo"], "active")
    assert bot.ltm_counts()["ltm_events"] == before["ltm_events"] + 2
    bot.assert_log_clean()
