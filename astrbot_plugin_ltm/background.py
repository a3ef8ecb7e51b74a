"""Background work: one mechanism for every loop the plugin runs, so each
owner writes only its step.

A failing step never ends the task: it is logged once per kind of failure
(no traceback a second while a disk stays full) and tried again after a
doubling pause, never in a tight loop (docs/decisions.md#d104). AstrBot
reloads a plugin as a new instance: whatever the old one started must end
in ``terminate()``, or every config save would leak a worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from .logs import log

FIRST_BACKOFF = 0.5  # seconds after a first failure; doubled after each next one
MAX_BACKOFF = 30.0

Step = Callable[[], Awaitable[object]]
# Seconds between two steps when nothing wakes the task; None (or a callable's None): only a wake runs it.
Interval = float | Callable[[], float | None] | None


@dataclass(frozen=True)
class Failure:
    """A failure its owner knows (a full disk, a locked database): logged as
    ``text`` at ``level``, without a traceback. ``kind`` tells repeats apart."""

    kind: str
    text: str
    level: int = logging.WARNING


Explain = Callable[[Exception], Failure | None]


class BackgroundTask:
    """A named loop around its owner's ``step``. ``every``: the wait between
    steps (a callable is read each time); None waits for a wake only.
    ``finish`` runs on every :meth:`stop`, started or not (a last flush)."""

    def __init__(self, name: str, step: Step, *, every: Interval = None, run_at_start: bool = False,
                 explain: Explain | None = None, finish: Step | None = None) -> None:
        self.name = name
        self._step = step
        self._every = every
        self._run_at_start = run_at_start
        self._explain = explain
        self._finish = finish
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._backoff = FIRST_BACKOFF
        self._failing: str | None = None  # the kind of failure logged last, until a step succeeds
        self.failures = 0  # failed steps since start (tests, diagnostics)

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        if not self.running:
            self._task = asyncio.create_task(self._loop(), name=f"ltm-{self.name}")
            self._task.add_done_callback(self._ended)

    def wake(self) -> None:
        """Run the step now (after the one running, if any); a pause after a
        failure is kept."""
        self._wake.set()

    async def stop(self) -> None:
        """End the loop (a step running is cancelled), then run ``finish``."""
        if self._task is not None:
            task, self._task = self._task, None
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._finish is not None:
            await self._finish()

    # -- the loop --------------------------------------------------------------

    def _interval(self) -> float | None:
        return self._every() if callable(self._every) else self._every

    async def _wait(self) -> None:
        every = self._interval()
        if every is None:
            await self._wake.wait()
        else:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=every)
        self._wake.clear()

    async def _loop(self) -> None:
        due = self._run_at_start
        while True:
            if not due:
                await self._wait()
            try:
                await self._step()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                # Not woken early: a wake a turn brings must not retry a full disk at once.
                await asyncio.sleep(self._failed(exc))
                due = True
            else:
                due = False
                self._succeeded()

    def _failed(self, exc: Exception) -> float:
        """Log the failure once per kind; the pause before the next try."""
        known = self._explain(exc) if self._explain is not None else None
        kind = known.kind if known is not None else f"{type(exc).__module__}.{type(exc).__qualname__}"
        delay = max(self._backoff, self._interval() or 0.0)
        self._backoff = min(self._backoff * 2, MAX_BACKOFF)
        self.failures += 1
        if kind == self._failing:
            log.debug("ltm: %s task failed again (%s); retrying in %.1fs", self.name, kind, delay)
        elif known is not None:
            log.log(known.level, "ltm: %s task: %s; retrying in %.1fs", self.name, known.text, delay)
        else:
            log.error("ltm: %s task failed; retrying in %.1fs", self.name, delay, exc_info=exc)
        self._failing = kind
        return delay

    def _succeeded(self) -> None:
        self._backoff = FIRST_BACKOFF
        if self._failing is not None:
            log.info("ltm: %s task works again", self.name)
            self._failing = None

    def _ended(self, task: asyncio.Task[None]) -> None:
        # Only stop() ends the loop; anything else is a bug that must be seen.
        if not task.cancelled() and task.exception() is not None:
            log.error("ltm: %s task ended", self.name, exc_info=task.exception())


class TaskSet:
    """Background tasks started together and stopped in the order given."""

    def __init__(self, *tasks: BackgroundTask) -> None:
        self.tasks = tasks

    def start(self) -> None:
        for task in self.tasks:
            task.start()

    async def stop(self) -> None:
        """Stop every task; one that fails to stop is logged and the others
        are stopped all the same."""
        for task in self.tasks:
            try:
                await task.stop()
            except Exception:
                log.exception("ltm: stopping the %s task failed; stopping the others", task.name)
