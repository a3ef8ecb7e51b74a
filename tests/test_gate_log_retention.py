"""The gate log has a bound: rows older than GATE_LOG_KEEP_DAYS go, in
batches, newer ones stay for policy replays (docs/decisions.md#d99)."""

from __future__ import annotations

from astrbot_plugin_ltm.learning.retention import GATE_LOG_KEEP_DAYS, prune_gate_log
from astrbot_plugin_ltm.storing.tables import GateLogEntry, MemoryItem

TEA = {"type": "preference", "fact": "Alice loves green tea", "fact_key": "tea", "confidence": 0.9}
CITY = {"type": "profile", "fact": "Alice lives in Lyon", "fact_key": "city", "confidence": 0.9}
BOOK = {"type": "preference", "fact": "Alice reads Dune", "fact_key": "book", "confidence": 0.9}


async def test_gate_log_rows_past_the_kept_days_are_deleted_and_newer_ones_kept(ltm, origin):
    a = origin("alice")
    await ltm.turn(a, "I love green tea", "Nice.", TEA)
    ltm.clock.advance(days=100)
    await ltm.turn(a, "I live in Lyon", "Lovely.", CITY)
    ltm.clock.advance(days=GATE_LOG_KEEP_DAYS - 100 + 1)  # tea's row is a day past the bound, Lyon's within

    assert await prune_gate_log(ltm.engine.db, ltm.clock) == 1
    assert [r.fact_key for r in await ltm.rows(GateLogEntry)] == ["city"]
    assert (await ltm.item(MemoryItem.fact_key == "tea")).status == "active"  # the memory itself stays
    assert await prune_gate_log(ltm.engine.db, ltm.clock) == 0


async def test_a_gate_log_backlog_is_pruned_in_several_small_writes(ltm, origin):
    a = origin("alice")
    for fact in (TEA, CITY, BOOK):
        await ltm.turn(a, f"about {fact['fact_key']}", "OK.", fact)
    ltm.clock.advance(days=GATE_LOG_KEEP_DAYS + 1)

    assert await prune_gate_log(ltm.engine.db, ltm.clock, batch=2) == 3
    assert await ltm.rows(GateLogEntry) == []
