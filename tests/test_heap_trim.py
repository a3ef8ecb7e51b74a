"""The heap's free pages go back to the system (astrbot_plugin_ltm/heap.py)."""

from __future__ import annotations

import asyncio
import gc
import sys

import psutil
import pytest

from astrbot_plugin_ltm.heap import MALLOC_TRIM, HeapTrim


def _rss_mb() -> float:
    return psutil.Process().memory_info().rss / 2**20


@pytest.mark.skipif(not sys.platform.startswith("linux") or MALLOC_TRIM is None, reason="glibc's malloc_trim")
def test_freed_chunks_between_live_ones_are_returned_by_a_trim() -> None:
    # 1 KiB chunks come from malloc (past Python's small-object allocator); keeping one in
    # 64 alive pins the heap's top, so plain free() cannot return the rest.
    chunks = [bytes(1024) + i.to_bytes(4, "little") for i in range(200_000)]
    kept = chunks[::64]
    del chunks
    gc.collect()
    before = _rss_mb()
    asyncio.run(HeapTrim(every=3600).step())
    after = _rss_mb()
    assert len(kept) == 3125
    assert before - after > 100, (before, after)


def test_a_library_without_malloc_trim_is_left_alone() -> None:
    trim = HeapTrim(trim=None)
    asyncio.run(trim.step())
    assert not trim.available and trim.trims == 0


def test_the_trim_runs_on_its_interval_as_a_background_task() -> None:
    calls: list[int] = []

    def fake_trim(pad: int) -> int:
        calls.append(pad)
        return 1

    async def scenario() -> None:
        trim = HeapTrim(every=0.01, trim=fake_trim)
        trim.task.start()
        await asyncio.sleep(0.1)
        await trim.task.stop()

    asyncio.run(scenario())
    assert len(calls) >= 3 and set(calls) == {0}
