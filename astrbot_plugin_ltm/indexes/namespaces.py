"""The namespace cache the keyword and the vector index share.

A namespace is what an index holds of one scope (and corpus, and model):
loaded from SQLite on first use, evicted least recently used first, and kept
in step with committed writes. The cache's maps are only touched on the
event loop; loading and updating a namespace run where the index says.

Three races are handled here once for both indexes:

- two reads of a cold namespace share one load (:class:`Loads`), and only
  the first reads wait for it, at most ``COLD_WAIT`` in all;
- an update committed while a namespace loads may be one the load did not
  see: it is queued and applied to the loaded namespace before it is used
  (updates are idempotent, so one the load saw does no harm);
- a namespace invalidated while it loads (its whole scope changed) is
  loaded again rather than kept.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from ..heap import release_freed_memory
from ..logs import log

# Past it, a read goes on without the namespace; the load finishes for the next (docs/decisions.md#d15).
COLD_WAIT = 1.0

# After a load or eviction this big, freed memory goes back to the system (docs/decisions.md#d41).
RELEASE_AFTER_BYTES = 2**20

# Each saves a load only until its recheck (30 s for vectors): a few thousand
# cover far more empty reads than a recheck window sees (docs/decisions.md#d149).
MAX_FOUND_EMPTY = 4096


# Applied to a namespace: (namespace, replayed) -> False to drop it and load
# it afresh. ``replayed``: it is applied after a load that may have seen it.
type Update[N] = Callable[[N, bool], bool]
type Matches[K] = Callable[[K], bool]
type Runner = Callable[[Callable[[], list[bool]]], Awaitable[list[bool]]]


class Loads[K: Hashable, V]:
    """Loads in flight, one per key: a second caller joins the first's."""

    def __init__(self, what: str) -> None:
        self.what = what  # for the log: "keyword namespace", "vector namespace"
        self._running: dict[K, tuple[asyncio.Future[V], float]] = {}  # and when it started

    def __bool__(self) -> bool:
        return bool(self._running)

    async def get(self, key: K, load: Callable[[], Awaitable[V]], wait: float | None = None) -> V | None:
        """What ``load`` gives for ``key``, starting it unless it runs.
        ``wait``: how long after the load started a caller still waits (None:
        until done); later callers get None at once."""
        running = self._running.get(key)
        if running is None:
            started_now = asyncio.ensure_future(load())
            running = self._running[key] = (started_now, time.monotonic())
            started_now.add_done_callback(lambda done: self._done(key, done))
        task, started = running
        if wait is None:
            return await asyncio.shield(task)
        left = wait - (time.monotonic() - started)
        if left <= 0 and not task.done():
            return None
        try:
            return await asyncio.wait_for(asyncio.shield(task), max(left, 0.0))
        except TimeoutError:
            log.info("ltm: %s %s still loading; reads go on without it until it is", self.what, key)
            return None

    async def settled(self) -> None:
        """Wait until no load runs (ended well or not: failures are logged)."""
        while self._running:
            await asyncio.gather(*(task for task, _ in list(self._running.values())), return_exceptions=True)

    def _done(self, key: K, task: asyncio.Future[V]) -> None:
        self._running.pop(key, None)
        if not task.cancelled() and task.exception() is not None:
            log.warning("ltm: %s %s could not be loaded: %s", self.what, key, task.exception())


class MemoryBudget:
    """Bytes the loaded namespaces of every index sharing it may hold
    together. Past it, the least recently used namespace of any of them
    goes first; the one a read has just loaded stays, even alone over the
    budget (a read needs it; the next read of another scope lets it go)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._caches: list[NamespaceCache[Any, Any]] = []
        self._clock = itertools.count()

    def join(self, cache: NamespaceCache[Any, Any]) -> None:
        self._caches.append(cache)

    def stamp(self) -> int:
        """Now, for least-recently-used order across the caches."""
        return next(self._clock)

    def held(self) -> int:
        return sum(cache.held() for cache in self._caches)

    async def enforce(self, keep: object = None) -> None:
        """Evict least recently used namespaces (never ``keep``) until the
        rest fit the limit."""
        held = self.held()
        while held > self.limit:
            candidates = [(stamp, cache) for cache in self._caches
                          if (stamp := cache.oldest_stamp(keep)) is not None]
            if not candidates:
                return
            _, cache = min(candidates, key=lambda found: found[0])
            held -= await cache.evict_oldest(keep)


@dataclass
class _Loading[N]:
    updates: list[Update[N]] = field(default_factory=list)  # committed while it loads
    stale: bool = False  # invalidated while it loads: load it again


class NamespaceCache[K: Hashable, N]:
    """Loaded namespaces by key, and the loads and updates in flight.
    ``load(key)`` returning None (nothing there) is asked again after
    ``empty_recheck`` seconds, or at once when an update names it. ``run(fn)``
    runs updates where the index's namespaces may be changed."""

    def __init__(self, what: str, load: Callable[[K], Awaitable[N | None]], run: Runner, max_loaded: int,
                 on_evict: Callable[[N], Awaitable[None]] | None = None, empty_recheck: float = 0.0,
                 size_of: Callable[[N], int] | None = None, budget: MemoryBudget | None = None) -> None:
        self.max_loaded = max_loaded
        self._load_fn = load
        self._run = run
        self._on_evict = on_evict
        self._empty_recheck = empty_recheck
        self._size_of = size_of or (lambda _ns: 0)
        self._budget = budget
        if budget is not None:
            budget.join(self)
        self._loaded: OrderedDict[K, N] = OrderedDict()
        self._used_at: dict[K, int] = {}  # the budget's stamp of each loaded one's last use
        self._sizes: dict[K, int] = {}  # each loaded one's bytes, as of its load or last update
        self._loading: dict[K, _Loading[N]] = {}
        # Found to hold nothing, and when: oldest first, at most MAX_FOUND_EMPTY.
        self._empty: OrderedDict[K, float] = OrderedDict()
        self._loads: Loads[K, N | None] = Loads(what)

    # -- using -------------------------------------------------------------------

    async def get(self, key: K, wait: float | None = None) -> N | None:
        """The namespace of ``key``; None if it holds nothing, is still
        loading after ``wait``, or failed to load (``wait`` None: raise)."""
        ready, ns = self.at_hand(key)
        if ready:
            return ns
        try:
            return await self._loads.get(key, lambda: self._load(key), wait)
        except Exception:
            if wait is None:
                raise
            return None

    async def get_all(self, keys: Sequence[K], wait: float | None = None) -> list[N | None]:
        """``get`` of each key, without a trip through the event loop when
        all are at hand: the search starts at once (docs/decisions.md#d72)."""
        found = [self.at_hand(key) for key in keys]
        if all(ready for ready, _ in found):
            return [ns for _, ns in found]
        return list(await asyncio.gather(*(self.get(key, wait) for key in keys)))

    def at_hand(self, key: K) -> tuple[bool, N | None]:
        """(True, the namespace) if it is loaded; (True, None) if it was
        found to hold nothing lately; else (False, None): it must be loaded."""
        ns = self._loaded.get(key)
        if ns is not None:
            self._loaded.move_to_end(key)
            self._touch(key)
            return True, ns
        found_empty = self._empty.get(key)
        if found_empty is not None:
            if time.monotonic() - found_empty < self._empty_recheck:
                return True, None
            del self._empty[key]  # expired: loaded again
        return False, None

    def peek(self, key: K) -> N | None:
        """The loaded namespace of ``key``, if any, without loading it."""
        return self._loaded.get(key)

    def loaded(self) -> Iterator[tuple[K, N]]:
        return iter(list(self._loaded.items()))

    async def settled(self) -> None:
        """Wait for the loads that reads left running."""
        await self._loads.settled()

    def clear(self) -> None:
        """Forget every loaded namespace (as after a restart)."""
        self._loaded.clear()
        self._used_at.clear()
        self._sizes.clear()
        self._empty.clear()

    # -- the memory budget ------------------------------------------------------------

    def held(self) -> int:
        """As of their loads and updates: asking every namespace took 0.4 ms for 512, on every load."""
        return sum(self._sizes.values())

    def oldest_stamp(self, keep: object = None) -> int | None:
        """When the least recently used namespace but ``keep`` was last used."""
        for key, ns in self._loaded.items():
            if ns is not keep:
                return self._used_at.get(key, -1)
        return None

    async def evict_oldest(self, keep: object = None) -> int:
        """Evict the least recently used namespace but ``keep``; its bytes."""
        for key, ns in self._loaded.items():
            if ns is not keep:
                size = self._sizes.get(key, 0)
                self._drop(key)
                if self._on_evict is not None:
                    await self._on_evict(ns)
                del ns
                if size >= RELEASE_AFTER_BYTES:
                    await asyncio.to_thread(release_freed_memory)
                return size
        return 0

    def _touch(self, key: K) -> None:
        if self._budget is not None:
            self._used_at[key] = self._budget.stamp()

    def _drop(self, key: K) -> None:
        del self._loaded[key]
        self._used_at.pop(key, None)
        self._sizes.pop(key, None)

    # -- following writes -----------------------------------------------------------

    async def update(self, updates: Sequence[tuple[Matches[K], Update[N]]]) -> None:
        """Apply committed updates: to loaded namespaces now, loading ones once
        loaded. One whose update returns False, or fails, is dropped."""
        targets: list[tuple[K, N, Update[N]]] = []
        for matches, apply in updates:
            self._forget_empty(matches)
            for key, loading in self._loading.items():
                if matches(key):
                    loading.updates.append(apply)
            targets += [(key, ns, apply) for key, ns in self._loaded.items() if matches(key)]
        if not targets:
            return
        try:
            results = await self._run(lambda: [apply(ns, False) for _, ns, apply in targets])
        except Exception:  # a namespace that missed a write must not be used again
            for matches, _ in updates:
                self.invalidate(matches)
            raise
        for (key, ns, _), ok in zip(targets, results, strict=True):
            if self._loaded.get(key) is ns:
                if ok:
                    self._sizes[key] = self._size_of(ns)
                else:
                    self._drop(key)
        if self._budget is not None:  # the namespaces grew
            await self._budget.enforce()

    def invalidate(self, matches: Matches[K]) -> None:
        """Drop the namespaces ``matches`` names (one loading now is loaded again)."""
        for key in [k for k in self._loaded if matches(k)]:
            self._drop(key)
        for key, loading in self._loading.items():
            if matches(key):
                loading.stale = True
        self._forget_empty(matches)

    def _found_empty(self, key: K) -> None:
        now = time.monotonic()
        self._empty[key] = now
        self._empty.move_to_end(key)
        # Oldest first: drop the expired, then any past the cap.
        while self._empty:
            oldest, found = next(iter(self._empty.items()))
            if now - found < self._empty_recheck and len(self._empty) <= MAX_FOUND_EMPTY:
                break
            del self._empty[oldest]

    def _forget_empty(self, matches: Matches[K]) -> None:
        for key in [k for k in self._empty if matches(k)]:
            del self._empty[key]

    # -- loading ---------------------------------------------------------------------

    async def _load(self, key: K) -> N | None:
        while True:
            loading = self._loading[key] = _Loading()
            try:
                ns = await self._load_fn(key)
                if await self._catch_up(ns, loading):
                    break
            finally:
                del self._loading[key]
        if ns is None:
            self._found_empty(key)
            return None
        self._loaded[key] = ns
        self._sizes[key] = self._size_of(ns)
        self._touch(key)
        while len(self._loaded) > self.max_loaded:
            await self.evict_oldest(ns)
        if self._budget is not None:
            await self._budget.enforce(keep=ns)
        if self._sizes.get(key, 0) >= RELEASE_AFTER_BYTES:  # what its build freed (once it is in place)
            await asyncio.to_thread(release_freed_memory)
        return ns

    async def _catch_up(self, ns: N | None, loading: _Loading[N]) -> bool:
        """Apply the updates committed while ``ns`` loaded, and those
        committed while they are applied; False: load it again."""
        applied = 0
        while not loading.stale and applied < len(loading.updates):
            if ns is None:  # something was stored while it found nothing
                return False
            batch, applied = loading.updates[applied:], len(loading.updates)
            if not all(await self._run(partial(_replay, ns, batch))):
                return False
        return not loading.stale


class DerivedNamespaces[K: Hashable, N]:
    """What the keyword and the vector index answer alike, of their cache."""

    _cache: NamespaceCache[K, N]

    @property
    def loaded_count(self) -> int:
        return sum(1 for _ in self._cache.loaded())

    def held(self) -> int:
        return self._cache.held()

    async def loads_settled(self) -> None:
        await self._cache.settled()

    def clear(self) -> None:
        self._cache.clear()


def exactly[K](wanted: K) -> Matches[K]:
    return lambda key: key == wanted


def _replay[N](ns: N, updates: list[Update[N]]) -> list[bool]:
    """Updates committed while ``ns`` loaded, which it may already hold."""
    return [apply(ns, True) for apply in updates]
