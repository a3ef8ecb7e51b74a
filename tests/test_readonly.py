"""emergency_read_only: not one row changes in any ltm_ table, reads go on,
and switching it off resumes writes at once."""

from __future__ import annotations

from pathlib import Path

import pytest

from astrbot_plugin_ltm.doors.commands import Commands
from astrbot_plugin_ltm.operating.queries import ItemFilter
from astrbot_plugin_ltm.scope import Scope
from astrbot_plugin_ltm.storing.database import ReadOnlyError

FACT = {"type": "task_state", "fact": "Alice is migrating to API v2", "fact_key": "migration"}


async def populated(ltm, origin):
    a = origin("alice")
    await ltm.engine.remember(a, "I like green tea")
    await ltm.turn(a, "I'm migrating to API v2", "Good luck.", FACT)
    await ltm.record(a, "I live in Paris", "Nice.")  # left pending
    return a


async def test_read_only_blocks_every_write_but_not_reads(ltm, origin):
    a = await populated(ltm, origin)
    coffee = (await ltm.engine.remember(origin("bob"), "I like coffee")).memory_id
    queued_before = ltm.engine.record_turn(a, "queued before the switch", "OK.")
    assert queued_before and ltm.engine.recorder.queued == 2

    errors = ltm.configure({"emergency_read_only": True})
    assert errors == [] and ltm.engine.config.emergency_read_only
    before_counts = await ltm.table_counts()
    before = await ltm.table_snapshot()
    assert before_counts["ltm_items"] == 3 and before_counts["ltm_events"] >= 5

    # recording (hot path and flush)
    ltm.engine.record_turn(a, "Remember that I am vegetarian", "OK.")
    ltm.engine.record_tool(a, "weather", {"city": "Paris"}, "sunny")
    assert await ltm.engine.recorder.flush() == 0
    assert ltm.engine.recorder.queued == 0
    # extraction of the events left pending
    ltm.gateway.facts({"type": "profile", "fact": "Alice lives in Paris"})
    await ltm.engine.worker.drain()
    # the retention sweep (the task_state item is past its 7 days)
    ltm.clock.advance(days=30)
    assert await ltm.engine.worker.sweep_expired() == 0
    # explicit memories
    with pytest.raises(ReadOnlyError):
        await ltm.engine.remember(a, "I am vegetarian")
    # operator and user edits
    item = (await ltm.items())[0]
    with pytest.raises(ReadOnlyError):
        await ltm.engine.admin.update_item(item.memory_id, {"importance": 0.1}, "operator:root")
    with pytest.raises(ReadOnlyError):
        await ltm.engine.admin.delete(item.memory_id, "operator:root")
    with pytest.raises(ReadOnlyError):
        await ltm.engine.admin.review([coffee], "approve", "operator:root")
    with pytest.raises(ReadOnlyError):
        await ltm.engine.admin.review([coffee], "reject", "operator:root")
    with pytest.raises(ReadOnlyError):
        await ltm.engine.admin.forget_scope(Scope("user", "qq:alice"), "user:alice")
    # chat commands say so instead of failing
    commands = Commands(ltm.engine)
    assert "read-only" in await commands.remember(a, "I am vegetarian")
    assert "read-only" in await commands.forget(a, item.memory_id[:8])

    assert await ltm.table_counts() == before_counts
    assert await ltm.table_snapshot() == before

    # reads go on
    ltm.clock.advance(days=-30)
    block = await ltm.block(a, "green tea migration")
    assert {s.fact for s in block.items} == {"Alice likes green tea", "Alice is migrating to API v2"}
    assert (await ltm.engine.admin.list_items(ItemFilter()))[1] == 3
    assert "read-only" in await commands.status(a)

    # switching it off resumes writes at once
    ltm.configure({"emergency_read_only": False})
    await ltm.record(a, "Remember that I am vegetarian", "OK.")
    outcome = await ltm.engine.remember(a, "I have a cat")
    assert outcome.action == "created"
    after = await ltm.table_counts()
    assert after["ltm_events"] == before_counts["ltm_events"] + 3
    assert after["ltm_items"] == before_counts["ltm_items"] + 2
    await ltm.engine.admin.delete(item.memory_id, "operator:root")
    assert len(await ltm.items()) == 4


async def test_starting_in_read_only_writes_nothing(make_ltm, origin):
    ltm = await make_ltm({"write_policy": {"mode": "auto"}})
    await populated(ltm, origin)
    before = await ltm.table_snapshot()
    again = await make_ltm({"emergency_read_only": True}, name=Path(ltm.path).name)
    assert again.engine.started
    assert await again.table_snapshot() == before
    assert await again.block(origin("alice"), "tea")



async def test_read_only_does_not_spend_model_calls_it_cannot_store(ltm, origin):
    # The worker polls every few seconds; while nothing can be written, each
    # extraction call would be paid for and thrown away, again and again.
    a = origin("alice")
    await ltm.record(a, "I live in Paris", "Nice.")
    ltm.configure({"emergency_read_only": True})
    for _ in range(3):
        await ltm.engine.worker.run_once(ignore_idle=True)
    assert ltm.gateway.calls == []
    ltm.configure({"emergency_read_only": False})
    ltm.gateway.facts({"type": "profile", "fact": "Alice lives in Paris"})
    await ltm.engine.worker.drain()
    assert len(ltm.gateway.calls) == 1 and len(await ltm.items()) == 1


# -- the read path's own connections -------------------------------------------------


async def test_read_connections_cannot_write(ltm, origin):
    # Database.run serves every read of a turn; a bug there must not be able
    # to change the store behind the operators' back.
    from sqlalchemy import text
    from sqlalchemy.exc import OperationalError

    await ltm.engine.remember(origin("alice"), "I like green tea")
    with pytest.raises(OperationalError, match="readonly"):
        await ltm.engine.db.run(lambda conn: conn.execute(text("DELETE FROM ltm_items")))
    assert await ltm.engine.db.run(lambda conn: conn.execute(text("SELECT count(*) FROM ltm_items")).scalar()) == 1


async def test_read_connections_see_committed_writes_and_survive_a_restart(ltm, origin):
    a = origin("alice")
    await ltm.engine.remember(a, "I like green tea")
    assert [s.fact for s in (await ltm.block(a, "tea")).items] == ["Alice likes green tea"]
    await ltm.engine.stop()  # closes the read threads and connections
    await ltm.engine.start(background=False)
    await ltm.engine.remember(a, "I live in Paris")
    block = await ltm.block(a, "where do I live? Paris")
    assert any("Paris" in s.fact for s in block.items)


def test_an_in_memory_database_is_refused_with_a_clear_error():
    from sqlalchemy.ext.asyncio import create_async_engine

    from astrbot_plugin_ltm.storing.database import Database

    with pytest.raises(RuntimeError, match="database file"):
        Database(create_async_engine("sqlite+aiosqlite:///:memory:"))
