"""How many memories a conversation and a scope have gained lately: the
counts the write policy's rate limits are checked against."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from ..enums import WRITE_ACTIONS
from ..scope import Scope
from ..storing.database import write_rows
from ..storing.tables import NOT_SUPERSEDED, MemoryAudit, MemoryItem

# A private chat keeps one unified_msg_origin for ever: a day's count keeps the limit
# on bursts, not a lifetime cap (docs/decisions.md#d20).
SESSION_WINDOW = timedelta(hours=24)


class WriteCounts:
    """Writes made this session / hour, looked up once per batch and counted on."""

    def __init__(self, session: AsyncSession, scope: Scope, now: datetime) -> None:
        self._session = session
        self._scope = scope
        self._since = now - timedelta(hours=1)
        self._session_since = now - SESSION_WINDOW
        self._by_session: dict[str | None, int] = {}
        self._hour: int | None = None
        self._in_force: int | None = None

    async def session(self, session_id: str | None) -> int:
        if session_id is None:
            return 0
        if session_id not in self._by_session:
            await write_rows(self._session)  # the batch's audit rows so far count
            self._by_session[session_id] = (
                await self._session.execute(
                    select(func.count()).select_from(MemoryAudit).where(
                        MemoryAudit.session_id == session_id,
                        MemoryAudit.action.in_(WRITE_ACTIONS),
                        MemoryAudit.created_at >= self._session_since,
                    )
                )
            ).scalar_one()
        return self._by_session[session_id]

    async def hour(self) -> int:
        if self._hour is None:
            await write_rows(self._session)
            self._hour = (
                await self._session.execute(
                    select(func.count()).select_from(MemoryAudit).where(
                        MemoryAudit.scope == self._scope.kind,
                        MemoryAudit.scope_id == self._scope.id,
                        MemoryAudit.action.in_(WRITE_ACTIONS),
                        MemoryAudit.created_at >= self._since,
                    )
                )
            ).scalar_one()
        return self._hour

    async def in_force(self) -> int:
        """The scope's memories counting towards max_items_per_scope, once per batch, then
        kept by :meth:`grew`: a count per candidate walked the scope (docs/decisions.md#d94)."""
        if self._in_force is None:
            self._in_force = (await self._session.execute(
                select(func.count()).select_from(MemoryItem).where(
                    MemoryItem.scope == self._scope.kind, MemoryItem.scope_id == self._scope.id, NOT_SUPERSEDED)
            )).scalar_one()
        return self._in_force

    def grew(self, by: int) -> None:
        """``by`` more memories count (fewer when negative)."""
        if self._in_force is not None:
            self._in_force += by

    def add(self, session_id: str | None) -> None:
        if session_id is not None:
            self._by_session[session_id] = self._by_session.get(session_id, 0) + 1
        if self._hour is not None:
            self._hour += 1
