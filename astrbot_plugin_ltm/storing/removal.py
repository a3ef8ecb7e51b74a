"""Removing a memory and withholding turns: what deleting, rejecting,
evicting and forgetting have in common.

A removed memory leaves no row behind (evidence links, keyword row and
vector go with it). The turns behind it are *withheld*: kept in the archive,
never shown to the model again, their vectors deleted. Each step notes its
change for the derived indexes.
"""

from __future__ import annotations

from sqlalchemy import and_, delete, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from ..enums import ExtractionStatus, Status
from ..scope import Scope
from .batch_writes import write_rows
from .changes import MemoryRemoved, ScopeForgotten, TurnsWithheld, note
from .evidence import delete_links, event_ids_of
from .keyword_rows import delete_fact_row
from .tables import GateLogEntry, MemoryEvent, MemoryItem
from .vector_rows import delete_memory_vector, delete_scope_turn_vectors, delete_turn_vectors


async def remove_memory(session: AsyncSession, item: MemoryItem, *, withhold: bool) -> None:
    """Delete ``item`` with its evidence links, keyword row and vector.

    The turns behind it are withheld when ``withhold`` says so (an operator
    or the user deleted or rejected it) or when the item was held back (not
    active): without its evidence links a turn would count as one no memory
    covers, and in mode auto be shown.
    """
    assert item.id is not None, "a stored item"
    await write_rows(session)  # a batch's evidence links held so far are among those deleted
    if withhold or item.status != Status.ACTIVE:
        await withhold_evidence(session, item)
    await delete_links(session, item)
    await delete_fact_row(session, item.id)
    await delete_memory_vector(session, item.id)
    await session.delete(item)
    note(session, MemoryRemoved(Scope(item.scope, item.scope_id), item.id))


async def withhold_evidence(session: AsyncSession, item: MemoryItem) -> None:
    """Withhold the turns that evidence ``item``."""
    rows = (
        await session.execute(
            select(MemoryEvent.id, MemoryEvent.scope, MemoryEvent.scope_id).where(
                MemoryEvent.event_id.in_(await event_ids_of(session, [item.memory_id])),
                MemoryEvent.withheld.is_(False),
            )
        )
    ).all()
    if not rows:
        return
    ids = [rowid for rowid, _, _ in rows if rowid is not None]
    await session.execute(update(MemoryEvent).where(MemoryEvent.id.in_(ids)).values(withheld=True))
    await delete_turn_vectors(session, ids)
    by_scope: dict[Scope, list[int]] = {}
    for rowid, kind, scope_id in rows:
        if rowid is not None:
            by_scope.setdefault(Scope(kind, scope_id), []).append(rowid)
    note(session, *(TurnsWithheld(scope, tuple(rowids)) for scope, rowids in by_scope.items()))


async def forget_turns(session: AsyncSession, scope: Scope) -> None:
    """Forgetting a person also means never quoting them nor learning from
    what they said before: every turn of the scope is withheld and none
    still pending is extracted (all stay recorded)."""
    of_scope = and_(MemoryEvent.scope == scope.kind, MemoryEvent.scope_id == scope.id)
    await delete_scope_turn_vectors(session, scope)
    await session.execute(update(MemoryEvent).where(of_scope, MemoryEvent.withheld.is_(False)).values(withheld=True))
    await session.execute(
        update(MemoryEvent).where(of_scope, MemoryEvent.extraction_status == ExtractionStatus.PENDING)
        .values(extraction_status=ExtractionStatus.SKIPPED, next_attempt_at=None)
    )
    # The gate log quotes what they said: a replay must not learn from it either.
    await session.execute(delete(GateLogEntry).where(GateLogEntry.scope == scope.kind,
                                                     GateLogEntry.scope_id == scope.id))
    note(session, ScopeForgotten(scope))
