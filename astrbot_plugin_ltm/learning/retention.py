"""Retention: memories past their type's ``retention_days`` are marked
expired (never deleted: the review page still shows them, audited)."""

from __future__ import annotations

from sqlalchemy import select, text

from ..clock import Clock
from ..enums import AuditAction, Status
from ..i18n import msg
from ..storing.audit import audit
from ..storing.database import Database, ReadOnlyError
from ..storing.memory_rows import memory_changed
from ..storing.tables import MemoryItem

ACTOR = "system:retention"


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
