"""The raw archive's bound in a real AstrBot (issue 39): ``retention_days.turns``
deletes the old turns no memory cites after the plugin reloads with it,
and the dashboard's compact action shows what it would free, then frees it
as a job; each batch is audited, memories and their evidence stay;
``GET stats`` and an admin's ``/ltm status`` say what memory costs on disk.

The turns are made old by moving their times back in AstrBot's database
(the plugin reads its clock like AstrBot: a month cannot pass in a test).
"""

from __future__ import annotations

import sqlite3
import time
from datetime import datetime, timedelta

import pytest

from devtools.astrbot_home import Client

pytestmark = pytest.mark.e2e
API = Client.plugin_api()


@pytest.fixture(scope="module")
def bot(bot_factory):
    with bot_factory("archive", {"write_policy": {"mode": "auto"}}) as b:
        yield b


def backdate(bot, days: int, user: str) -> set[int]:
    """Move the user's turns ``days`` back; returns their row ids."""
    db = sqlite3.connect(bot.db_path, timeout=30)
    try:
        rows = db.execute("SELECT id, created_at FROM ltm_events WHERE scope_id = ?", (f"webchat:{user}",)).fetchall()
        for rowid, at in rows:
            moved = datetime.fromisoformat(at) - timedelta(days=days)
            db.execute("UPDATE ltm_events SET created_at = ? WHERE id = ?",
                       (moved.strftime("%Y-%m-%d %H:%M:%S.%f"), rowid))
        db.commit()
    finally:
        db.close()
    return {rowid for rowid, _ in rows}


def ids(bot, user: str) -> set[int]:
    return {r["id"] for r in bot.query("SELECT id FROM ltm_events WHERE scope_id = ?", (f"webchat:{user}",))}


def cited(bot, user: str) -> set[int]:
    return {r["id"] for r in bot.query(
        "SELECT e.id FROM ltm_events e WHERE e.scope_id = ? AND (EXISTS (SELECT 1 FROM ltm_evidence v "
        "WHERE v.event_id = e.event_id) OR EXISTS (SELECT 1 FROM ltm_summary_links s WHERE s.event_rowid = e.id))",
        (f"webchat:{user}",))}


def api(bot, method: str, route: str, body=None) -> dict:
    answer = bot.client.request(method, f"{API}/{route}", body)
    assert answer.get("status") == "ok", bot.diag(f"{method} {route}: {answer}")
    return answer["data"]


def talk(bot, user: str, session: str) -> None:
    for said in ("My name is Nora and I live in Oslo", "the weather is grey again", "I had soup for lunch"):
        assert bot.chat(said, user, session) == f"ECHO: {said}"
    bot.wait_extracted(user, ["name is Nora", "lives in Oslo"], "active")
    bot.wait_for(lambda: not bot.query("SELECT 1 FROM ltm_events WHERE scope_id = ? AND extraction_status = "
                                       "'pending'", (f"webchat:{user}",)), 30, "extraction done with every turn")


def test_retention_deletes_the_old_turns_no_memory_cites_after_a_reload(bot):
    talk(bot, "nora", "archive-1")
    old = backdate(bot, 45, "nora")
    keep = cited(bot, "nora")
    assert keep and old - keep, bot.diag("the fake model's facts cite the first message only")
    memories = bot.query("SELECT memory_id, status FROM ltm_items ORDER BY id")
    config = bot.get_plugin_config()
    config["retention_days"] = {**config.get("retention_days", {}), "turns": 30}
    bot.put_plugin_config(config)  # AstrBot reloads the plugin: its worker sweeps at once
    bot.wait_for(lambda: ids(bot, "nora") == keep, 60, "the old uncited turns to go")
    assert [tuple(r) for r in bot.query("SELECT memory_id, status FROM ltm_items ORDER BY id")] == [
        tuple(r) for r in memories]  # every memory stays, as it was
    rows = api(bot, "GET", "audit?action=delete_turns")["entries"]
    assert rows and sum(r["detail"]["turns"] for r in rows) == len(old - keep)
    assert all(r["actor"] == "system:retention" for r in rows)
    assert not bot.query("SELECT 1 FROM ltm_turn_vectors WHERE event_rowid NOT IN (SELECT id FROM ltm_events)")
    bot.assert_log_clean()


def test_compact_shows_what_it_frees_then_frees_it_and_the_stats_say_the_size(bot):
    config = bot.get_plugin_config()
    config["retention_days"] = {**config.get("retention_days", {}), "turns": -1}
    bot.put_plugin_config(config)
    talk(bot, "olaf", "archive-2")
    old = backdate(bot, 100, "olaf")
    keep = cited(bot, "olaf")
    before = ids(bot, "olaf")

    plan = api(bot, "GET", "compact?days=60")
    assert plan["dry_run"] and plan["turns"]["turns"] == len(old - keep) and plan["bytes"] > 0
    assert ids(bot, "olaf") == before  # a dry run writes nothing

    job = api(bot, "POST", "compact", {"days": 60})
    deadline = time.monotonic() + 60
    while (state := api(bot, "GET", f"compact/{job['job_id']}"))["status"] == "running":
        assert time.monotonic() < deadline, bot.diag("the compact job never ended")
        time.sleep(0.3)
    assert state["status"] == "done" and state["report"]["turns"]["turns"] == len(old - keep), state
    assert ids(bot, "olaf") == keep
    rows = [r for r in api(bot, "GET", "audit?action=delete_turns")["entries"] if r["actor"] != "system:retention"]
    assert rows and all(r["actor"].startswith("operator:") for r in rows)

    storage = api(bot, "GET", "stats")["storage"]
    assert storage["tables_bytes"] > 0 and storage["turns"] >= len(keep) and storage["oldest_turn"]
    status = bot.admin_chat("/ltm status", "archive-admin")
    assert "Memory on disk" in status and "a day" in status, bot.diag(status)
    bot.assert_log_clean()
