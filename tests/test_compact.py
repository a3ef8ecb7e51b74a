"""The compact action and what memory costs on disk (operating/storage.py,
docs/decisions.md#d163): ``GET compact`` shows what freeing old turns no
memory cites would free and writes nothing; ``POST compact`` frees it as a
job, in batches, one audit row each; ``GET stats`` and ``/ltm status``
(admins) say the size on disk, the growth per day, the oldest turn kept,
and warn when the disk would fill within 30 days."""

from __future__ import annotations

import asyncio

from astrbot_plugin_ltm.doors.commands import Commands
from astrbot_plugin_ltm.enums import AuditAction
from astrbot_plugin_ltm.learning import retention
from astrbot_plugin_ltm.operating import storage
from tests.helpers import old_and_new, rowids


async def finished(ltm, job_id: str) -> dict:
    for _ in range(400):
        job = ltm.engine.jobs.get(job_id).as_dict()
        if job["status"] != "running":
            return job
        await asyncio.sleep(0.02)
    raise AssertionError("the compact job never ended")


async def test_compact_shows_what_it_would_free_then_frees_it_in_batches_each_audited(
        make_ltm, origin, api_of, monkeypatch):
    monkeypatch.setattr(retention, "FIRST_BATCH", 3)  # batches of three, however long each takes
    monkeypatch.setattr(retention, "MIN_BATCH", 3)
    monkeypatch.setattr(retention, "MAX_BATCH", 3)
    ltm, cited, chat, summarised, recent = await old_and_new(make_ltm, origin, keep=-1)  # nothing by itself
    api = api_of(ltm)
    before = await rowids(ltm, "ltm_events", "id")

    plan = await api.ok("compact_plan", {"days": "30"})
    assert plan["dry_run"] and plan["days"] == 30 and plan["turns"]["turns"] == len(chat) + 1
    assert plan["bytes"] >= plan["turns"]["bytes"] > 0
    assert await rowids(ltm, "ltm_events", "id") == before  # a dry run writes nothing

    started = await api.ok("start_compact", {"days": 30}, "root")
    job = await finished(ltm, started["job_id"])
    assert job["status"] == "done" and job["report"]["turns"]["turns"] == len(chat) + 1
    assert job["report"]["turns"]["batches"] == 3  # seven turns, three a batch
    assert await rowids(ltm, "ltm_events", "id") == before - {e.id for e in chat} - {cited[1].id}
    batches = [a for a in await ltm.audit() if a.action == AuditAction.DELETE_TURNS]
    assert [a.detail["turns"] for a in batches] == [3, 3, 1] and {a.actor for a in batches} == {"operator:root"}
    assert (await api.ok("compact_plan", {"days": "30"}))["turns"]["turns"] == 0  # nothing left to free
    await ltm.engine.stop()


async def test_compact_needs_a_number_of_days_and_writes_nothing_while_read_only(make_ltm, origin, api_of):
    ltm, *_ = await old_and_new(make_ltm, origin, keep=-1)
    api = api_of(ltm)
    assert "days" in await api.err(400, "compact_plan", {})  # no days asked, none configured
    assert "days" in await api.err(400, "start_compact", {"days": 0}, "root")
    ltm.configure({"emergency_read_only": True})
    await api.err(409, "start_compact", {"days": 30}, "root")
    await ltm.engine.stop()


async def test_stats_and_status_say_the_size_the_growth_the_oldest_turn_and_when_the_disk_fills(
        make_ltm, origin, api_of, monkeypatch):
    ltm, *_ = await old_and_new(make_ltm, origin, keep=-1)
    api = api_of(ltm)
    disk = await api.ok("stats", {})
    size = disk["storage"]
    assert size["tables_bytes"] > 0 and size["tables"]["ltm_events"] > 0 and size["turns"] == 12
    assert size["oldest_turn"].startswith("2025-03-01") and size["turns_last_week"] == 2  # the recent exchange
    assert size["growth_per_day"] > 0 and size["days_until_full"] > 30
    assert not any(n["code"] == "notice.disk_fills" for n in disk["notices"])
    admin = origin("root", admin=True)
    status = await Commands(ltm.engine).status(admin)
    assert "Memory on disk" in status and "a day" in status and "Oldest turn kept: 2025-03-01" in status

    # A disk with a few days' growth left: a notice, in both languages.
    monkeypatch.setattr(storage.shutil, "disk_usage", lambda _path: type("U", (), {"free": 10_000})())
    ltm.clock.advance(minutes=11)  # the report is measured again
    notices = (await api.ok("stats", {"lang": "zh"}))["notices"]
    (notice,) = [n for n in notices if n["code"] == "notice.disk_fills"]
    assert "磁盘将写满" in notice["message"]
    assert "it is full in 1 days" in await Commands(ltm.engine).status(admin)  # 10 KB free, ~7 KB a day
    await ltm.engine.stop()
