"""Background work the plugin starts and must keep in hand.

- BackgroundTask: a named task started once and stopped cleanly. AstrBot
  reloads a plugin by creating a new instance; whatever the old one started
  must end in ``terminate()``, or every config save would leak a worker.
- Loads: caches loaded on first use (a scope's keyword or vector
  namespace), one load per key at a time, that a read waits for only so
  long.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

from .logs import log

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class BackgroundTask:
    def __init__(self, name: str, run: Callable[[], Awaitable[None]]) -> None:
        self.name = name
        self._run = run
        self._task: asyncio.Task | None = None

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        if not self.running:
            self._task = asyncio.create_task(self._run(), name=self.name)

    async def stop(self) -> None:
        if self._task is None:
            return
        self._task.cancel()
        try:
            await self._task
        except asyncio.CancelledError:
            pass
        self._task = None


class Loads(Generic[K, V]):
    """Loads in flight, one per key: a second caller joins the first's."""

    def __init__(self, what: str) -> None:
        self.what = what  # for the log: "keyword namespace", "vector namespace"
        self._running: dict[K, tuple[asyncio.Task[V], float]] = {}  # and when it started

    def __bool__(self) -> bool:
        return bool(self._running)

    async def get(self, key: K, load: Callable[[], Awaitable[V]], wait: float | None = None) -> V | None:
        """What ``load`` gives for ``key``, starting it unless it runs.

        ``wait``: how long after the load started a caller still waits for
        it; later callers get None at once and the load goes on for the
        next. So only the first reads of a cold cache wait, and none for
        longer than ``wait`` in all. None: wait until it is done. A failed
        load is logged; the callers waiting for it get its exception.
        """
        running = self._running.get(key)
        if running is None:
            task = asyncio.ensure_future(load())
            running = self._running[key] = (task, time.monotonic())
            task.add_done_callback(lambda done: self._done(key, done))
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

    def _done(self, key: K, task: asyncio.Task[V]) -> None:
        self._running.pop(key, None)
        if not task.cancelled() and task.exception() is not None:
            log.warning("ltm: %s %s could not be loaded: %s", self.what, key, task.exception())
