"""Usage counts (recalling/usage.py): each memory counts how often it was
injected or returned by the tool, and when last; counted in memory, written
in batches, kept across a restart, never written while read-only, and never
in the way of a read."""

from __future__ import annotations

import asyncio

from astrbot_plugin_ltm.recalling.usage import Usage
from astrbot_plugin_ltm.storing.database import Database
from astrbot_plugin_ltm.storing.tables import MemoryItem


async def two_memories(ltm, origin):
    a = origin("alice")
    await ltm.engine.remember(a, "I like green tea")
    await ltm.engine.remember(a, "I live in Paris")
    return a


async def counts(ltm) -> dict[str, tuple[int, int, int, bool]]:
    """fact -> (injected, tool, total, has a last use)"""
    return {i.fact: (i.injected_count, i.tool_count, i.use_count, i.last_used_at is not None)
            for i in await ltm.items()}


async def test_injection_counts_each_memory_in_the_block_once_per_read(ltm, origin):
    a = await two_memories(ltm, origin)
    before = {i.memory_id: i.updated_at for i in await ltm.items()}
    assert await counts(ltm) == {"Alice likes green tea": (0, 0, 0, False), "Alice lives in Paris": (0, 0, 0, False)}

    first = await ltm.block(a, "green tea")
    assert "Alice likes green tea" in {s.fact for s in first.items}
    await ltm.block(a, "green tea")
    assert ltm.engine.usage.pending > 0
    assert await ltm.engine.usage.flush() == len(first.items)
    after = await counts(ltm)
    assert after["Alice likes green tea"] == (2, 0, 2, True)
    shown_paris = "Alice lives in Paris" in {s.fact for s in first.items}
    assert after["Alice lives in Paris"] == ((2, 0, 2, True) if shown_paris else (0, 0, 0, False))
    # a use is not a change of the memory
    assert {i.memory_id: i.updated_at for i in await ltm.items()} == before
    assert await ltm.engine.usage.flush() == 0  # nothing new: no write


async def test_tool_returns_are_counted_apart_from_injections(ltm, origin):
    a = await two_memories(ltm, origin)
    block = await ltm.block(a, "Paris")
    paris = [s for s in block.items if s.fact == "Alice lives in Paris"]
    assert paris
    ltm.engine.usage.note(paris, via="tool")
    ltm.clock.advance(hours=2)
    ltm.engine.usage.note(paris, via="tool")
    await ltm.engine.usage.flush()
    (item,) = await ltm.items(MemoryItem.fact == "Alice lives in Paris")
    assert (item.injected_count, item.tool_count, item.use_count) == (1, 2, 3)
    assert item.last_used_at == ltm.clock()


async def test_raw_turns_in_the_block_are_not_counted(ltm, origin):
    a = origin("alice")
    await ltm.record(a, "We hiked up to the lake at dawn", "Lovely.")
    block = await ltm.block(a, "lake hike")
    assert block.events and not block.items
    assert ltm.engine.usage.pending == 0


async def test_counts_survive_a_restart(make_ltm, origin):
    ltm = await make_ltm({"write_policy": {"mode": "auto"}}, name="kept.db")
    a = await two_memories(ltm, origin)
    await ltm.block(a, "green tea")
    await ltm.engine.stop()  # stopping writes what is still counted in memory
    again = await make_ltm({"write_policy": {"mode": "auto"}}, name="kept.db")
    assert (await counts(again))["Alice likes green tea"] == (1, 0, 1, True)
    await again.block(a, "green tea")
    await again.engine.usage.flush()
    assert (await counts(again))["Alice likes green tea"] == (2, 0, 2, True)


async def test_nothing_is_counted_or_written_while_read_only(ltm, origin):
    a = await two_memories(ltm, origin)
    await ltm.block(a, "green tea")  # counted before the switch
    ltm.configure({"emergency_read_only": True})
    before = await ltm.table_snapshot()
    block = await ltm.block(a, "green tea")
    assert "Alice likes green tea" in {s.fact for s in block.items}  # reads go on
    ltm.engine.usage.note(block, via="tool")
    assert await ltm.engine.usage.flush() == 0
    await ltm.engine.usage.task.stop()
    assert await ltm.table_snapshot() == before
    assert ltm.engine.usage.pending == 0


async def test_a_failed_flush_keeps_the_counts_for_the_next(ltm, origin, monkeypatch):
    a = await two_memories(ltm, origin)
    await ltm.block(a, "green tea")
    real_write = Database.write

    def broken(self):
        raise OSError("disk I/O error")

    monkeypatch.setattr(Database, "write", broken)
    assert await ltm.engine.usage.flush() == 0
    await ltm.block(a, "green tea")  # a read goes on, and is counted too
    monkeypatch.setattr(Database, "write", real_write)
    assert await ltm.engine.usage.flush() >= 1
    assert (await counts(ltm))["Alice likes green tea"] == (2, 0, 2, True)


async def test_a_broken_note_never_breaks_the_read(ltm, origin, monkeypatch):
    a = await two_memories(ltm, origin)
    monkeypatch.setattr(ltm.engine.usage, "_clock", lambda: 1 / 0)
    block = await ltm.block(a, "green tea")
    assert "Alice likes green tea" in {s.fact for s in block.items}


async def test_the_background_task_writes_after_enough_reads(ltm, origin):
    a = await two_memories(ltm, origin)
    block = await ltm.block(a, "green tea")
    await ltm.engine.usage.flush()
    usage = Usage(ltm.engine.db, ltm.clock, flush_seconds=3600, flush_after=3)
    usage.task.start()
    try:
        for _ in range(3):
            usage.note(block)
        for _ in range(500):  # the task runs once the loop is free; no timing is asserted
            if usage.written:
                break
            await asyncio.sleep(0.01)
    finally:
        await usage.task.stop()
    assert usage.written == len(block.items)
    assert (await counts(ltm))["Alice likes green tea"] == (4, 0, 4, True)


async def test_a_memory_deleted_before_the_flush_is_skipped(ltm, origin):
    a = await two_memories(ltm, origin)
    block = await ltm.block(a, "green tea")
    tea = next(s for s in block.items if s.fact == "Alice likes green tea")
    await ltm.engine.admin.delete(tea.memory_id, "operator:root")
    await ltm.engine.usage.flush()
    assert "Alice likes green tea" not in await counts(ltm)
