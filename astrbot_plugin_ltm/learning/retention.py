"""Retention: memories past their type's ``retention_days`` are marked
expired (never deleted: the review page still shows them, audited); gate
log rows older than ``GATE_LOG_KEEP_DAYS`` are deleted."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import delete, select, text

from ..clock import Clock
from ..enums import AuditAction, Status
from ..i18n import msg
from ..storing.audit import audit
from ..storing.database import Database, ReadOnlyError
from ..storing.memory_rows import memory_changed
from ..storing.tables import GateLogEntry, MemoryItem

ACTOR = "system:retention"
# The gate log (one row per candidate, with its fact) is what a policy replay
# asks the gate again from: replays reach back this far (docs/decisions.md#d99).
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


async def prune_gate_log(db: Database, clock: Clock, keep_days: int = GATE_LOG_KEEP_DAYS,
                         batch: int = PRUNE_BATCH) -> int:
    """Delete gate log rows older than ``keep_days``; returns how many."""
    cutoff = clock() - timedelta(days=keep_days)
    total = 0
    try:
        while True:
            async with db.write() as session:
                old = select(GateLogEntry.id).where(GateLogEntry.created_at < cutoff).limit(batch)
                result = await session.execute(delete(GateLogEntry).where(GateLogEntry.id.in_(old.scalar_subquery())))
            gone = int(getattr(result, "rowcount", 0) or 0)
            total += gone
            if gone < batch:
                return total
    except ReadOnlyError:
        return total
