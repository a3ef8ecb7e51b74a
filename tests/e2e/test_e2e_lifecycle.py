"""Restarting AstrBot keeps memories and pending events; reloading
the plugin through AstrBot leaves no duplicate hooks or background workers."""

from __future__ import annotations

import time

import pytest

pytestmark = pytest.mark.e2e

QUESTION = "What do you know about me?"


@pytest.fixture(scope="module")
def bot(bot_factory):
    with bot_factory("lifecycle", {"write_policy": {"mode": "auto"}}) as b:
        yield b


def _items(bot) -> dict[str, tuple]:
    rows = bot.query("SELECT memory_id, scope, scope_id, type, fact, status, confidence, evidence_count FROM ltm_items")
    return {r["memory_id"]: tuple(r) for r in rows}


def _events(bot) -> dict[str, str]:
    rows = bot.query("SELECT event_id, extraction_status FROM ltm_events")
    return {r["event_id"]: r["extraction_status"] for r in rows}


def test_a_restart_keeps_memories_and_pending_events(bot):
    said = "My name is Alice and I live in Paris"
    assert bot.chat(said, "alice", "t5-seed") == f"ECHO: {said}"
    name, city = bot.wait_extracted("alice", ["name is Alice", "lives in Paris"], "active")

    bot.control(extraction="error", error_status=400)
    try:
        said = "My name is Frank and I live in Oslo"
        assert bot.chat(said, "frank", "t5-frank") == f"ECHO: {said}"
        bot.wait_for(lambda: [e for e in bot.events("frank") if e["source_role"] == "user" and e["attempts"] >= 1],
                     20, "a failed extraction attempt for frank")
        # One more turn right before the shutdown: still in the recorder's
        # hands when AstrBot is told to stop.
        again = "See you after the restart"
        assert bot.chat(again, "frank", "t5-frank") == f"ECHO: {again}"
        old_pid = bot.pid
        bot.stop()
        assert bot.proc.proc.returncode == 0, bot.diag(f"unclean shutdown rc={bot.proc.proc.returncode}", lines=300)

        counts = bot.ltm_counts()
        items = _items(bot)
        events = _events(bot)
        frank_events = bot.events("frank")
        assert len(frank_events) == 4, bot.diag(f"frank's 2 turns should be 4 events, got {frank_events}")
        assert all(e["extraction_status"] == "pending" for e in frank_events), frank_events
        pending = {e["event_id"] for e in frank_events}
        assert {name["memory_id"], city["memory_id"]} <= set(items)

        bot.start()
        assert bot.pid != old_pid
        # Vectors are a cache the worker fills in the background: a turn
        # recorded just before the stop gets its vector after the restart.
        after = bot.ltm_counts()
        vectors = ("ltm_item_vectors", "ltm_turn_vectors")
        assert {k: v for k, v in after.items() if k not in vectors} == \
            {k: v for k, v in counts.items() if k not in vectors} and \
            all(after[t] >= counts[t] for t in vectors), \
            bot.diag(f"row counts changed over the restart: {counts} -> {after}")
        assert _items(bot) == items
        events_after = _events(bot)
        assert set(events_after) == set(events)
        assert all(events_after[e] == "pending" for e in pending), {e: events_after[e] for e in pending}

        # The memories still reach the model after the restart.
        since = bot.mark()
        assert bot.chat(QUESTION, "alice", "t5-after-restart") == f"ECHO: {QUESTION}"
        blocks = bot.memory_blocks(bot.turn_request(QUESTION, since))
        assert len(blocks) == 1 and {f.get("fact") for f in blocks[0]["facts"]} >= {name["fact"], city["fact"]}, blocks
    finally:
        bot.control(extraction="rules", error_status=500)
        if bot.proc.proc is None or bot.proc.proc.poll() is not None:
            bot.start()

    # The pending events survive to be extracted by the new process.
    bot.wait_extracted("frank", ["name is Frank", "lives in Oslo"], "active", timeout=30)
    assert {e["event_id"] for e in bot.events("frank")} == pending
    bot.assert_log_clean()


def test_a_reload_leaves_no_duplicate_hooks_or_background_tasks(bot):
    said = "My name is Gina and I live in Lima"
    assert bot.chat(said, "gina", "t5-gina-seed") == f"ECHO: {said}"
    bot.wait_extracted("gina", ["name is Gina", "lives in Lima"], "active")

    # Each successful extraction answer now takes 1 s: a second worker left
    # running by a reload (it polls every 0.3 s) would pick up the same
    # pending events meanwhile and send its own extraction request.
    bot.control(extraction="rules", delay_seconds=1.0)
    try:
        for round_no, said in enumerate(["I really like green tea", "I really like jazz"], start=1):
            log_start = bot.log_size()
            bot.reload_plugin()
            log = bot.log_text(log_start)
            assert bot.plugin_terminated(log_start), bot.diag("reload did not terminate the old instance")
            loads = log.count("Plugin astrbot_plugin_ltm (")
            assert loads == 1, bot.diag(f"reload #{round_no} loaded the plugin {loads} times")

            events_before = bot.ltm_counts()["ltm_events"]
            since = bot.mark()
            assert bot.chat(said, "gina", f"t5-reload-{round_no}") == f"ECHO: {said}"
            body = bot.turn_request(said, since)
            blocks = bot.memory_blocks(body)
            assert len(blocks) == 1, \
                bot.diag(f"reload #{round_no}: expected one memory block, got {len(blocks)}: {blocks}")
            assert body["messages"][-1]["content"][0]["text"].count(bot.HEADER) == 1

            liked = said.removeprefix("I really like ")
            (item,) = bot.wait_extracted("gina", [f"likes {liked}"], "active", timeout=20)
            time.sleep(0.6)  # let a duplicate worker's late request arrive, if there is one
            assert bot.ltm_counts()["ltm_events"] - events_before == 2, bot.diag(
                f"reload #{round_no}: one turn recorded {bot.ltm_counts()['ltm_events'] - events_before} events")
            extraction_calls = bot.extraction_requests(since, containing=said)
            assert len(extraction_calls) == 1, bot.diag(
                f"reload #{round_no}: the turn was sent for extraction {len(extraction_calls)} times")
            matching = [i for i in bot.items("gina") if liked in i["fact"]]
            assert len(matching) == 1 and matching[0]["evidence_count"] == 1, matching
            evidence = bot.query("SELECT event_id FROM ltm_evidence WHERE memory_id=?", (item["memory_id"],))
            assert len(evidence) == 1, [tuple(r) for r in evidence]
    finally:
        bot.control(delay_seconds=0)
    bot.assert_log_clean()
