"""A memory's derived rows follow its fact: written here, in the caller's
transaction, with the change the derived indexes follow."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from ..scope import Scope
from .changes import MemoryWritten, note
from .keyword_rows import write_fact_row
from .tables import MemoryItem
from .vector_rows import delete_memory_vector


async def fact_written(session: AsyncSession, item: MemoryItem, *, created: bool) -> None:
    """``item`` (flushed) was created, or its fact replaced: its keyword row
    is rewritten and a replaced fact's vector deleted (the background fill
    embeds the new one)."""
    assert item.id is not None, "flush the item first"
    tokens = await write_fact_row(session, item)
    if not created:
        await delete_memory_vector(session, item.id)
    note(session, MemoryWritten(Scope(item.scope, item.scope_id), item.id, tokens, created))


def memory_changed(session: AsyncSession, item: MemoryItem) -> None:
    """``item`` changed but for its fact (status, type, scores)."""
    assert item.id is not None, "flush the item first"
    note(session, MemoryWritten(Scope(item.scope, item.scope_id), item.id))
