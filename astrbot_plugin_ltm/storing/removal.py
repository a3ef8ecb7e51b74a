"""Removing a memory and withholding turns: what deleting, rejecting, evicting and
forgetting have in common. A withheld turn stays in the archive, never shown again.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Row, and_, delete, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from ..enums import ExtractionStatus, Role, ScopeKind, Status
from ..scope import Scope
from .archive import OldTurn
from .archive import delete_turns as delete_old_turns
from .changes import MemoryRemoved, ScopeForgotten, TurnsWithheld, note
from .database import write_rows
from .evidence import delete_links, event_ids_of
from .keyword_rows import delete_fact_row
from .memory_rows import contexts_of, forget_contexts
from .tables import GateLogEntry, MemoryEvent, MemoryItem
from .vector_rows import delete_memory_vector, delete_scope_turn_vectors, delete_turn_vectors


async def remove_memory(session: AsyncSession, item: MemoryItem, *, withhold: bool) -> None:
    """Delete ``item`` with its evidence links, keyword row and vector. Its turns are
    withheld when asked or when it was held back: unlinked, they would be shown."""
    assert item.id is not None, "a stored item"
    await write_rows(session)  # a batch's evidence links held so far are among those deleted
    if withhold or item.status != Status.ACTIVE:
        await withhold_evidence(session, item)
    await delete_links(session, item)
    await delete_fact_row(session, item.id)
    await delete_memory_vector(session, item.id)
    shared_in = await contexts_of(session, item)
    await forget_contexts(session, item.id)
    await session.delete(item)
    note(session, MemoryRemoved(Scope(item.scope, item.scope_id), item.id, shared_in))


async def withhold_evidence(session: AsyncSession, item: MemoryItem) -> None:
    rows = (
        await session.execute(
            select(MemoryEvent.id, MemoryEvent.scope, MemoryEvent.scope_id).where(
                MemoryEvent.event_id.in_(await event_ids_of(session, [item.memory_id])),
                MemoryEvent.withheld.is_(False),
            )
        )
    ).all()
    await _withhold(session, rows)


async def _withhold(session: AsyncSession, rows: Sequence[Row[int | None, str, str]]) -> None:
    ids = [rowid for rowid, _, _ in rows if rowid is not None]
    if not ids:
        return
    await session.execute(update(MemoryEvent).where(MemoryEvent.id.in_(ids)).values(withheld=True))
    await delete_turn_vectors(session, ids)
    by_scope: dict[Scope, list[int]] = {}
    for rowid, kind, scope_id in rows:
        if rowid is not None:
            by_scope.setdefault(Scope(kind, scope_id), []).append(rowid)
    note(session, *(TurnsWithheld(scope, tuple(rowids)) for scope, rowids in by_scope.items()))


async def forget_turns(session: AsyncSession, scope: Scope) -> None:
    """Forgetting a person also means never quoting them nor learning from what they
    said: every turn withheld, none extracted (all stay recorded)."""
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


async def delete_turns(session: AsyncSession, rowids: list[int]) -> int:
    """Delete uncited turns with their terms and vectors, as retention does; how many."""
    if not rowids:
        return 0
    rows = (await session.execute(select(MemoryEvent.id, MemoryEvent.scope, MemoryEvent.scope_id,
                                         MemoryEvent.created_at).where(MemoryEvent.id.in_(rowids)))).all()
    return await delete_old_turns(session, [OldTurn(rowid, Scope(kind, scope_id), str(at), 0)
                                            for rowid, kind, scope_id, at in rows if rowid is not None])


async def withhold_lines(session: AsyncSession, accounts: Sequence[tuple[str, str]]) -> None:
    """Withhold and extract none of what these accounts said in groups: forgetting a
    person means never quoting them where others were listening."""
    said = or_(*(and_(MemoryEvent.platform_id == platform_id, MemoryEvent.sender_id == sender_id)
                 for platform_id, sender_id in accounts))
    theirs = and_(MemoryEvent.scope == ScopeKind.GROUP, MemoryEvent.source_role == Role.USER, said)
    rows = (await session.execute(select(MemoryEvent.id, MemoryEvent.scope, MemoryEvent.scope_id)
                                  .where(theirs, MemoryEvent.withheld.is_(False)))).all()
    await _withhold(session, rows)
    await session.execute(update(MemoryEvent).where(theirs, MemoryEvent.extraction_status == ExtractionStatus.PENDING)
                          .values(extraction_status=ExtractionStatus.SKIPPED, next_attempt_at=None))
