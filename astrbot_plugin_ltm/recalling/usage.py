"""How often each memory is used (in a block, or by the search tool), and when last.
Counted in memory and written in the background, so a read never waits for or fails
because of a count; a crash loses seconds of counts.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, cast

from sqlalchemy import Table, bindparam, case

from ..background import BackgroundTask
from ..clock import Clock, utcnow
from ..logs import log
from ..storing.database import Database, ReadOnlyError
from ..storing.tables import MemoryItem
from .block import MemoryBlock
from .read import Selected

FLUSH_SECONDS = 5.0  # the longest counts wait in memory (what a crash can lose)
FLUSH_AFTER = 200  # notes that make a flush come sooner (a busy bot)
MAX_PENDING = 100_000  # memories counted and not yet written, kept past a failed flush at most

Via = Literal["block", "tool"]


@dataclass(slots=True)
class _Count:
    injected: int = 0
    tool: int = 0
    last: datetime | None = None


class Usage:
    def __init__(self, db: Database, clock: Clock = utcnow, flush_seconds: float = FLUSH_SECONDS,
                 flush_after: int = FLUSH_AFTER) -> None:
        self._db = db
        self._clock = clock
        self._flush_after = flush_after
        self._pending: dict[str, _Count] = {}
        self._notes = 0
        # Writes every flush_seconds, sooner when enough notes wake it, and once more at stop.
        self.task = BackgroundTask("usage", self.flush, every=flush_seconds, finish=self.flush)
        self.written = 0  # memory counts added to the store (for the stats and tests)
        self.dropped = 0  # counts not written: read-only, or too many waiting after failed flushes

    @property
    def pending(self) -> int:
        return len(self._pending)

    def note(self, used: MemoryBlock | Iterable[Selected], via: Via = "block") -> None:
        """Count a block's (or the tool's) memories as used once now; never raises."""
        try:
            if self._db.is_read_only():
                return
            selected = used.items if isinstance(used, MemoryBlock) else used
            now = self._clock()
            for s in selected:
                if s.type == "event":
                    continue
                count = self._pending.get(s.memory_id)
                if count is None:
                    if len(self._pending) >= MAX_PENDING:
                        self.dropped += 1
                        continue
                    count = self._pending[s.memory_id] = _Count()
                if via == "tool":
                    count.tool += 1
                else:
                    count.injected += 1
                count.last = now
            self._notes += 1
            if self._notes >= self._flush_after:
                self.task.wake()
        except Exception:  # counting must never break a read
            log.exception("ltm: could not count the memories used")

    # -- writing ------------------------------------------------------------------

    async def flush(self) -> int:
        """Add the counts noted so far in one write; how many memories' counts were written."""
        pending, self._pending, self._notes = self._pending, {}, 0
        if not pending:
            return 0
        items = cast(Table, MemoryItem.__table__)  # Core: one UPDATE run for every memory
        c = items.c
        at = bindparam("at", type_=c.last_used_at.type)
        statement = items.update().where(c.memory_id == bindparam("m")).values(
            injected_count=c.injected_count + bindparam("i"),
            tool_count=c.tool_count + bindparam("t"),
            use_count=c.use_count + bindparam("i") + bindparam("t"),
            last_used_at=case((c.last_used_at.is_(None), at), (c.last_used_at < at, at), else_=c.last_used_at),
        )
        rows = [{"m": memory_id, "i": n.injected, "t": n.tool, "at": n.last} for memory_id, n in pending.items()]
        try:
            async with self._db.write() as session:
                await session.execute(statement, rows)
        except ReadOnlyError:
            self.dropped += len(rows)
            return 0
        except asyncio.CancelledError:  # stopped while waiting for the write lock: flushed by stop()
            self._merge_back(pending)
            raise
        except Exception:
            log.exception("ltm: could not write the usage of %d memories; kept for the next try", len(rows))
            self._merge_back(pending)
            return 0
        self.written += len(rows)
        return len(rows)

    def _merge_back(self, pending: dict[str, _Count]) -> None:
        for memory_id, n in pending.items():
            count = self._pending.get(memory_id)
            if count is None:
                if len(self._pending) >= MAX_PENDING:
                    self.dropped += 1
                    continue
                self._pending[memory_id] = n
                continue
            count.injected += n.injected
            count.tool += n.tool
            if n.last is not None and (count.last is None or n.last > count.last):
                count.last = n.last
