"""The audit trail: one row per change to memory and per policy decision,
with who caused it, why, and the details a reviewer needs."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from ..clock import utcnow
from ..enums import AuditAction
from ..scope import Scope
from .database import add_row
from .tables import MemoryAudit, MemoryItem

_AUDIT = MemoryAudit.metadata.tables[MemoryAudit.__tablename__]


def audit(
    session: AsyncSession,
    action: AuditAction,
    actor: str,
    reason: str = "",
    *,
    item: MemoryItem | None = None,
    scope: Scope | None = None,
    session_id: str | None = None,
    now: datetime | None = None,
    **detail: Any,
) -> None:
    """Add an audit row to the caller's transaction. ``actor``: ``system:<part>``,
    ``operator:<name>`` or ``user:<id>``."""
    if item is not None and scope is None:
        scope = Scope(item.scope, item.scope_id)
    add_row(session, _AUDIT, {
        "created_at": now or utcnow(),
        "action": action,
        "memory_id": item.memory_id if item else None,
        "scope": scope.kind if scope else None,
        "scope_id": scope.id if scope else None,
        "session_id": session_id,
        "actor": actor,
        "reason": reason,
        "detail": detail,
    }, MemoryAudit)
