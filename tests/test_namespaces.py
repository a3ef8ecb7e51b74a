"""The namespace cache both indexes share: one load per key, a bounded
wait for it, and committed updates that reach a namespace however its load
and the update interleave."""

from __future__ import annotations

import asyncio

import pytest

from astrbot_plugin_ltm.indexes import namespaces
from astrbot_plugin_ltm.indexes.namespaces import Loads, MemoryBudget, NamespaceCache


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


# -- NamespaceCache -------------------------------------------------------------------


class Store:
    """A source of truth and a cache of it, with loads that can be held
    after they have read (so writes can land between the read and its end)."""

    def __init__(self, max_loaded: int = 8, empty_recheck: float = 0.0, budget: MemoryBudget | None = None) -> None:
        self.rows: dict[str, set[int]] = {"a": {1}, "b": {2}, "c": set()}
        self.have_read = asyncio.Event()
        self.release = asyncio.Event()
        self.release.set()
        self.loads: list[str] = []
        self.evicted: list[set[int]] = []
        self.cache: NamespaceCache[str, set[int]] = NamespaceCache(
            "test namespace", self.load, self.run, max_loaded, self.on_evict, empty_recheck,
            size_of=lambda ns: 100 * len(ns), budget=budget)

    async def load(self, key: str) -> set[int] | None:
        self.loads.append(key)
        found = set(self.rows[key])
        self.have_read.set()
        await self.release.wait()
        return found or None

    @staticmethod
    async def run(fn):
        return fn()

    async def on_evict(self, ns: set[int]) -> None:
        self.evicted.append(ns)

    async def write(self, key: str, rowid: int) -> None:
        """A committed write and the update it hands to the cache."""
        self.rows[key].add(rowid)
        replays: list[bool] = []

        def apply(ns: set[int], replayed: bool) -> bool:
            replays.append(replayed)
            ns.add(rowid)
            return True

        await self.cache.update([(lambda k: k == key, apply)])
        self.replays = replays


async def test_an_update_committed_while_a_namespace_loads_reaches_it_once_loaded():
    store = Store()
    store.release.clear()
    loading = asyncio.create_task(store.cache.get("a"))
    await store.have_read.wait()  # the load has read {1}
    await store.write("a", 5)
    assert store.replays == []  # not applied yet: nothing is loaded
    store.release.set()
    assert await loading == {1, 5}
    assert store.replays == [True]  # applied to the loaded namespace, marked as replayed
    await store.write("a", 6)  # loaded now: applied at once
    assert store.cache.peek("a") == {1, 5, 6} and store.replays == [False]


async def test_a_namespace_invalidated_while_it_loads_is_loaded_again():
    store = Store()
    store.release.clear()
    loading = asyncio.create_task(store.cache.get("a"))
    await store.have_read.wait()
    store.rows["a"] = {9}
    store.cache.invalidate(lambda key: key == "a")  # the whole scope changed
    store.release.set()
    assert await loading == {9}
    assert store.loads == ["a", "a"]


async def test_an_update_that_cannot_apply_drops_the_namespace_for_a_fresh_load():
    store = Store()
    assert await store.cache.get("a") == {1}
    await store.cache.update([(lambda key: key == "a", lambda ns, replayed: False)])
    assert store.cache.peek("a") is None
    assert await store.cache.get("a") == {1} and store.loads == ["a", "a"]


async def test_a_namespace_found_empty_is_not_asked_again_until_an_update_names_it():
    store = Store(empty_recheck=60.0)
    assert await store.cache.get("c") is None
    assert await store.cache.get("c") is None and store.loads == ["c"]  # remembered as empty
    await store.write("c", 3)
    assert await store.cache.get("c") == {3} and store.loads == ["c", "c"]


async def test_a_namespace_found_empty_while_a_row_was_written_is_counted_again():
    store = Store(empty_recheck=60.0)
    store.release.clear()
    loading = asyncio.create_task(store.cache.get("c"))
    await store.have_read.wait()  # it found nothing
    await store.write("c", 4)
    store.release.set()
    assert await loading == {4}


async def test_the_least_recently_used_namespace_goes_first_and_is_handed_over():
    store = Store(max_loaded=2)
    store.rows["d"] = {4}
    for key in ("a", "b"):
        await store.cache.get(key)
    await store.cache.get("a")  # used again: b is now the oldest
    await store.cache.get("d")
    assert [key for key, _ in store.cache.loaded()] == ["a", "d"]
    assert store.evicted == [{2}]


# -- the memory budget -----------------------------------------------------------------


def held_keys(*stores: Store) -> list[list[str]]:
    return [[key for key, _ in store.cache.loaded()] for store in stores]


async def test_namespaces_of_two_indexes_share_one_budget_least_recently_used_first_out():
    """Two caches (as the keyword and the vector index) under one budget of
    bytes: a load that goes past it evicts the least recently used
    namespace of either, handing it over first."""
    budget = MemoryBudget(limit=450)  # size_of: 100 bytes a row
    words, vectors = Store(budget=budget), Store(budget=budget)
    for store in (words, vectors):
        store.rows.update({"d": {4, 5}, "e": {6}})
    await words.cache.get("a")  # 100
    await vectors.cache.get("a")  # 200
    await words.cache.get("b")  # 300
    await words.cache.get("a")  # used again: vectors' a is now the oldest
    await vectors.cache.get("d")  # 500 > 450: vectors' a goes
    assert held_keys(words, vectors) == [["b", "a"], ["d"]] and vectors.evicted == [{1}]
    assert budget.held() == 400
    await vectors.cache.get("e")  # 500 again: words' b is the oldest now
    assert held_keys(words, vectors) == [["a"], ["d", "e"]] and words.evicted == [{2}]
    assert budget.held() == 400


async def test_a_namespace_larger_than_the_budget_is_kept_for_its_read_and_goes_at_the_next_load():
    budget = MemoryBudget(limit=250)
    store = Store(budget=budget)
    store.rows.update({"big": {1, 2, 3, 4}, "d": {4}})
    await store.cache.get("a")
    assert await store.cache.get("big") == {1, 2, 3, 4}  # alone over the budget, but the read gets it
    assert held_keys(store) == [["big"]] and store.evicted == [{1}]
    await store.cache.get("d")
    assert held_keys(store) == [["d"]] and store.evicted == [{1}, {1, 2, 3, 4}]


async def test_namespaces_grown_by_writes_are_held_to_the_budget():
    budget = MemoryBudget(limit=350)
    store = Store(budget=budget)
    for key in ("a", "b"):
        await store.cache.get(key)
    await store.write("b", 7)
    await store.write("b", 8)  # 100 + 300 > 350: a, the oldest, goes
    assert held_keys(store) == [["b"]] and store.evicted == [{1}]
    assert store.rows["b"] == await store.cache.get("b")


async def test_a_lower_budget_applies_at_the_next_load():
    budget = MemoryBudget(limit=10_000)
    store = Store(budget=budget)
    store.rows["d"] = {4}
    for key in ("a", "b"):
        await store.cache.get(key)
    budget.limit = 150
    await store.cache.get("d")
    assert held_keys(store) == [["d"]] and store.evicted == [{1}, {2}]


async def test_namespaces_at_hand_are_given_without_a_trip_through_the_event_loop():
    store = Store(empty_recheck=60.0)
    assert await store.cache.get_all(["a", "b", "c"]) == [{1}, {2}, None]  # loaded; "c" holds nothing
    # Now every one is at hand: the coroutine ends at its first step, so a
    # read's search is handed to its thread before anything else runs.
    step = store.cache.get_all(["a", "c"]).__await__()
    with pytest.raises(StopIteration) as done:
        step.send(None)
    assert done.value.value == [{1}, None]
    # One that must be loaded still is, with the others.
    store.rows["d"] = {4}
    assert await store.cache.get_all(["a", "d"]) == [{1}, {4}] and store.loads.count("d") == 1


async def test_many_distinct_empty_keys_leave_at_most_the_cap_oldest_out(monkeypatch):
    monkeypatch.setattr(namespaces, "MAX_FOUND_EMPTY", 3)
    store = Store(empty_recheck=60.0)
    store.rows.update({f"empty{i}": set() for i in range(10)})
    for i in range(10):
        assert await store.cache.get(f"empty{i}") is None
    assert len(store.cache._empty) == 3
    # The newest are still known empty; the oldest is loaded again.
    assert store.cache.at_hand("empty9") == (True, None)
    assert store.cache.at_hand("empty0") == (False, None)
    await store.cache.get("empty0")
    assert store.loads.count("empty0") == 2 and store.loads.count("empty9") == 1


async def test_a_key_found_empty_is_forgotten_once_its_recheck_is_due():
    store = Store(empty_recheck=0.05)
    assert await store.cache.get("c") is None
    assert store.cache.at_hand("c") == (True, None)
    await asyncio.sleep(0.06)
    assert store.cache.at_hand("c") == (False, None)
    assert "c" not in store.cache._empty
    # Ones already expired are let go when another is found empty.
    store.rows["d"] = set()
    assert await store.cache.get("c") is None
    await asyncio.sleep(0.06)
    assert await store.cache.get("d") is None
    assert list(store.cache._empty) == ["d"]
