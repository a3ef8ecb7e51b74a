"""Retention: memories past their type's ``retention_days`` are marked expired
(never deleted: still reviewable); old gate log rows and uncited turns are deleted."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial

from sqlalchemy import delete, select, text

from ..clock import Clock
from ..enums import AuditAction, Status
from ..i18n import msg
from ..scope import Scope
from ..storing.archive import START, OldTurn, Position, delete_turns, old_turns
from ..storing.audit import audit
from ..storing.database import Database, ReadOnlyError
from ..storing.driver_rows import touched
from ..storing.memory_rows import memory_changed
from ..storing.tables import GateLogEntry, MemoryItem

ACTOR = "system:retention"
# How far back policy replays reach, asking the gate again from its log (docs/decisions.md#d99).
GATE_LOG_KEEP_DAYS = 180
PRUNE_BATCH = 5000  # rows per write: the write lock is never held long


async def sweep_expired(db: Database, clock: Clock) -> int:
    """Mark memories past their retention as expired; returns how many."""
    now = clock()
    try:
        async with db.write() as session:
            rows = (await session.execute(
                select(MemoryItem).where(
                    MemoryItem.ttl_days.is_not(None),
                    MemoryItem.status.in_((Status.ACTIVE, Status.SHADOW)),
                    text("julianday(ltm_items.updated_at) + ltm_items.ttl_days < julianday(:now)"),
                ),
                {"now": now.isoformat(" ")},
            )).scalars().all()
            for item in rows:
                old = item.status
                item.status = Status.EXPIRED
                memory_changed(session, item)
                audit(session, AuditAction.EXPIRE, ACTOR, str(msg("learn.expired", days=item.ttl_days)),
                      item=item, now=now, old=old, new=Status.EXPIRED)
            return len(rows)
    except ReadOnlyError:
        return 0


async def prune_gate_log(db: Database, clock: Clock, batch: int = PRUNE_BATCH) -> int:
    """Delete gate log rows older than GATE_LOG_KEEP_DAYS; returns how many."""
    cutoff = clock() - timedelta(days=GATE_LOG_KEEP_DAYS)
    total = 0
    try:
        while True:
            async with db.write() as session:
                old = select(GateLogEntry.id).where(GateLogEntry.created_at < cutoff).limit(batch)
                result = await session.execute(delete(GateLogEntry).where(GateLogEntry.id.in_(old.scalar_subquery())))
            gone = touched(result)
            total += gone
            if gone < batch:
                return total
    except ReadOnlyError:
        return total


# -- old turns (retention_days.turns, the compact action) ------------------------------

WINDOW = 2000  # old turns looked at a read
FIRST_BATCH, MIN_BATCH, MAX_BATCH = 200, 10, 2000  # turns deleted a transaction
BATCH_SECONDS = 0.05  # what a batch aims to hold the write lock for (issue 39: never 0.1)
PAUSE_SECONDS = 0.05  # between batches, for AstrBot's own writes
REWALK = timedelta(days=1)  # the whole archive walked again (a memory deleted since may free turns)


@dataclass
class TurnSweep:
    """What a sweep of old turns did (or, dry, would do)."""

    looked_at: int = 0
    deleted: int = 0
    bytes: int = 0  # freed inside the database file (about)
    batches: int = 0
    longest_held: float = 0.0  # seconds
    oldest: str | None = None  # the oldest turn deleted (or deletable)
    newest: str | None = None
    scopes: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, object]:
        return {"looked_at": self.looked_at, "turns": self.deleted, "bytes": self.bytes, "batches": self.batches,
                "longest_held_ms": round(self.longest_held * 1000, 1), "oldest": self.oldest,
                "newest": self.newest, "scopes": len(self.scopes)}


async def sweep_turns(db: Database, cutoff: datetime, actor: str, reason: str, *, dry_run: bool = False,
                      after: Position = START,
                      progress: Callable[[TurnSweep], None] | None = None) -> tuple[TurnSweep, Position]:
    """Delete the uncited turns said before ``cutoff``, one audited batch of about
    BATCH_SECONDS at a time, from ``after``; what it did and where it ended."""
    done = TurnSweep()
    position, size = after, FIRST_BATCH
    while True:
        walk = await db.run(partial(old_turns, cutoff=cutoff, after=position, window=WINDOW))
        done.looked_at += walk.looked_at
        if not walk.looked_at:
            return done, position
        queue = walk.removable
        while queue:
            batch, queue = queue[:size], queue[size:]
            if dry_run:
                _count(done, batch, len(batch))
                continue
            try:
                async with db.write() as session:
                    held = time.monotonic()  # the write lock is ours from here to the commit
                    gone = await delete_turns(session, batch)
                    if gone:
                        audit(session, AuditAction.DELETE_TURNS, actor, reason, scope=_only_scope(batch),
                              turns=gone, first=batch[0].created_at, last=batch[-1].created_at,
                              cutoff=cutoff.isoformat(), bytes=sum(t.bytes for t in batch),
                              scopes=_per_scope(batch))
                seconds = time.monotonic() - held
            except ReadOnlyError:
                return done, position
            _count(done, batch, gone)
            done.batches += 1
            done.longest_held = max(done.longest_held, seconds)
            size = max(MIN_BATCH, size // 2) if seconds > BATCH_SECONDS * 1.5 else \
                min(MAX_BATCH, size * 2) if seconds < BATCH_SECONDS / 2 else size
            if progress is not None:
                progress(done)
            await asyncio.sleep(max(PAUSE_SECONDS, seconds))
        position = walk.position
        if progress is not None:
            progress(done)


def _count(done: TurnSweep, batch: list[OldTurn], gone: int) -> None:
    done.deleted += gone
    share = gone / len(batch) if batch else 0
    done.bytes += int(sum(t.bytes for t in batch) * share)
    for turn in batch:
        done.scopes[turn.scope.namespace] = done.scopes.get(turn.scope.namespace, 0) + 1
    if batch:
        done.oldest = done.oldest or batch[0].created_at
        done.newest = batch[-1].created_at


def _only_scope(batch: list[OldTurn]) -> Scope | None:
    scopes = {t.scope for t in batch}
    return next(iter(scopes)) if len(scopes) == 1 else None


def _per_scope(batch: list[OldTurn]) -> dict[str, int]:
    out: dict[str, int] = {}
    for turn in batch:
        key = f"{turn.scope.kind}:{turn.scope.id}"
        out[key] = out.get(key, 0) + 1
    return dict(sorted(out.items(), key=lambda kv: -kv[1])[:20])  # the 20 with most (a batch may span hundreds)


class TurnRetention:
    """Resumes where the last sweep ended, so each old turn is looked at once a day, not an hour."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._position: Position = START
        self._rewalk: datetime | None = None
        self.last: TurnSweep | None = None

    async def sweep(self, now: datetime, days: int | None) -> int:
        if days is None:
            return 0
        if self._rewalk is None or now >= self._rewalk:
            self._position, self._rewalk = START, now + REWALK
        done, self._position = await sweep_turns(
            self._db, now - timedelta(days=days), ACTOR, str(msg("learn.turns_deleted", days=days)),
            after=self._position)
        self.last = done
        return done.deleted
