"""Loads: one load per key at a time, and a bounded wait for it."""

from __future__ import annotations

import asyncio

import pytest

from astrbot_plugin_ltm.tasks import Loads


async def test_callers_of_one_key_share_one_load():
    loads: Loads[str, int] = Loads("test cache")
    calls = 0

    async def load() -> int:
        nonlocal calls
        calls += 1
        await asyncio.sleep(0.01)
        return 7

    assert await asyncio.gather(loads.get("a", load), loads.get("a", load)) == [7, 7]
    assert calls == 1 and not loads  # done loads are let go
    assert await loads.get("a", load) == 7 and calls == 2  # caching what was loaded is the caller's


async def test_only_the_first_callers_wait_and_the_load_goes_on_for_the_next():
    loads: Loads[str, int] = Loads("test cache")
    release = asyncio.Event()

    async def slow() -> int:
        await release.wait()
        return 1

    assert await loads.get("a", slow, wait=0.05) is None  # waited 50 ms, then went on
    assert await asyncio.wait_for(loads.get("a", slow, wait=0.05), 0.01) is None  # no second wait
    assert loads  # still loading
    release.set()
    assert await loads.get("a", slow) == 1  # wait=None: until it is done


async def test_a_failed_load_reaches_its_callers_and_the_next_call_loads_again():
    loads: Loads[str, int] = Loads("test cache")

    async def broken() -> int:
        raise OSError("disk gone")

    with pytest.raises(OSError):
        await loads.get("a", broken, wait=1.0)
    assert not loads

    async def fine() -> int:
        return 3

    assert await loads.get("a", fine, wait=1.0) == 3


async def test_settled_waits_for_every_load_left_running_and_their_failures_do_not_raise():
    loads: Loads[str, int] = Loads("test cache")
    finished: list[str] = []

    async def slow(key: str, fail: bool) -> int:
        await asyncio.sleep(0.05)
        finished.append(key)
        if fail:
            raise OSError("disk gone")
        return 1

    assert await loads.get("a", lambda: slow("a", False), wait=0.0) is None
    assert await loads.get("b", lambda: slow("b", True), wait=0.0) is None
    await loads.settled()
    assert sorted(finished) == ["a", "b"] and not loads
    await loads.settled()  # nothing running: returns at once
