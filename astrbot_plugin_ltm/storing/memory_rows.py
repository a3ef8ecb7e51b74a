"""A memory's derived rows follow its fact: written here, in the caller's
transaction, with the change the derived indexes follow. And the groups it
was said in (``ltm_item_contexts``, audience.py), whose namespaces hold it too."""

from __future__ import annotations

from sqlalchemy import delete, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from ..enums import ScopeKind, Visibility
from ..scope import Scope
from .changes import MemoryShared, MemoryUnshared, MemoryWritten, note
from .driver_rows import touched
from .keyword_rows import write_fact_row
from .tables import MemoryContext, MemoryItem
from .vector_rows import delete_memory_vector


async def fact_written(session: AsyncSession, item: MemoryItem, *, created: bool) -> None:
    """``item`` (flushed) was created, or its fact replaced: its keyword row
    is rewritten and a replaced fact's vector deleted (the background fill
    embeds the new one)."""
    assert item.id is not None, "flush the item first"
    tokens = await write_fact_row(session, item)
    if not created:
        await delete_memory_vector(session, item.id)
    shared_in = () if created else await contexts_of(session, item)
    note(session, MemoryWritten(Scope(item.scope, item.scope_id), item.id, tokens, created, shared_in))


def memory_changed(session: AsyncSession, item: MemoryItem) -> None:
    """``item`` changed but for its fact (status, type, scores)."""
    assert item.id is not None, "flush the item first"
    note(session, MemoryWritten(Scope(item.scope, item.scope_id), item.id))


async def contexts_of(session: AsyncSession, item: MemoryItem) -> tuple[Scope, ...]:
    """The groups ``item`` was said in besides its own scope (only a
    person's memory has any)."""
    if item.id is None or item.scope != ScopeKind.USER:
        return ()
    rows = await session.execute(select(MemoryContext.scope, MemoryContext.scope_id)
                                 .where(MemoryContext.item_id == item.id))
    return tuple(Scope(kind, scope_id) for kind, scope_id in rows)


async def share(session: AsyncSession, item: MemoryItem, group: Scope, *, created: bool) -> bool:
    """Note that ``item`` was said in ``group``; returns whether that is
    new. A shared memory joins the group's namespaces at once (``created``:
    it is new, so it has no vector yet)."""
    assert item.id is not None, "flush the item first"
    added = await session.execute(
        text("INSERT OR IGNORE INTO ltm_item_contexts (scope, scope_id, item_id) VALUES (:kind, :id, :item)"),
        {"kind": group.kind, "id": group.id, "item": item.id})
    new = touched(added) > 0
    if new and item.visibility == Visibility.SHARED:
        note(session, MemoryShared(group, item.id, await fact_tokens(session, item.id), created))
    return new


async def keep_private(session: AsyncSession, item: MemoryItem, visibility: str) -> None:
    """Narrow ``item`` to ``visibility`` (private or secret): the groups it
    was said in no longer recall it (their context rows stay: where it was said)."""
    if item.visibility == visibility:
        return
    was_shared = item.visibility == Visibility.SHARED
    item.visibility = visibility
    if was_shared:
        note(session, *(MemoryUnshared(group, item.id or 0) for group in await contexts_of(session, item)))


async def forget_contexts(session: AsyncSession, item_id: int) -> None:
    await session.execute(delete(MemoryContext).where(MemoryContext.item_id == item_id))


async def fact_tokens(session: AsyncSession, item_id: int) -> tuple[str, ...]:
    """The keyword tokens of a memory's fact, as its keyword row holds them."""
    row = (await session.execute(text("SELECT tokens FROM ltm_items_fts WHERE rowid = :r"), {"r": item_id})).first()
    return tuple(str(row[0] or "").split()) if row else ()
