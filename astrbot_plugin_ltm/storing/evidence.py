"""A memory's evidence: the turns it was learnt from.

A summary's links (nine in ten of all links) are two row ids in
``ltm_summary_links``, about 25 bytes where a row of ``ltm_evidence`` took
260 (docs/decisions.md#d162). Everything that reads or writes evidence does
it here, so both kinds are always read together.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, and_, delete, or_, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from ..enums import MemoryType, Method
from ..scope import Scope
from .driver_rows import fetch_rows, touched
from .tables import MemoryEvent, MemoryEvidence, MemoryItem, SummaryLink


def level_of(fact_key: str) -> str | None:
    """A summary's level, from its key (``summary_day_20261125`` → day)."""
    parts = fact_key.split("_")
    return parts[1] if len(parts) > 2 and parts[0] == "summary" else None


def summary_link(item: MemoryItem, event_id: str) -> MemoryEvidence:
    """A summary's link to a turn as an evidence row (not stored as one):
    what the API, the review page and an export show of it."""
    return MemoryEvidence(memory_id=item.memory_id, event_id=event_id, extraction_method=Method.SUMMARY,
                          extraction_meta={"level": level_of(item.fact_key)} if level_of(item.fact_key) else {},
                          created_at=item.created_at)


def is_summary_link(item: MemoryItem, method: str | None) -> bool:
    return item.type == MemoryType.SUMMARY and method == Method.SUMMARY


# -- writing ---------------------------------------------------------------------------


async def link_summary(session: AsyncSession, item: MemoryItem, event_ids: Iterable[str]) -> int:
    """Link the summary ``item`` (flushed) to the turns ``event_ids``;
    returns how many links are new."""
    assert item.id is not None, "flush the summary first"
    ids = json.dumps(list(dict.fromkeys(event_ids)))
    result = await session.execute(text(
        "INSERT OR IGNORE INTO ltm_summary_links (item_id, event_rowid) "
        "SELECT :item, id FROM ltm_events WHERE event_id IN (SELECT value FROM json_each(:ids))"),
        {"item": item.id, "ids": ids})
    return touched(result)


async def add_link(session: AsyncSession, item: MemoryItem, event_id: str, method: str,
                   meta: dict[str, Any], created_at: datetime) -> bool:
    """Link ``item`` to one event, in whichever table its kind of link
    lives; False when the link was there already."""
    if is_summary_link(item, method):
        return await link_summary(session, item, [event_id]) > 0
    found = (await session.execute(select(MemoryEvidence.id).where(
        MemoryEvidence.memory_id == item.memory_id, MemoryEvidence.event_id == event_id))).scalar_one_or_none()
    if found is not None:
        return False
    session.add(MemoryEvidence(memory_id=item.memory_id, event_id=event_id, extraction_method=method,
                               extraction_meta=meta, created_at=created_at))
    return True


async def delete_links(session: AsyncSession, item: MemoryItem) -> None:
    await session.execute(delete(MemoryEvidence).where(MemoryEvidence.memory_id == item.memory_id))
    if item.id is not None:
        await session.execute(delete(SummaryLink).where(SummaryLink.item_id == item.id))


# -- reading ---------------------------------------------------------------------------


async def event_ids_of(session: AsyncSession, memory_ids: Sequence[str]) -> list[str]:
    """The event ids the memories cite, each once."""
    if not memory_ids:
        return []
    rows = await session.execute(text(
        "SELECT event_id FROM ltm_evidence WHERE memory_id IN (SELECT value FROM json_each(:ids)) "
        "UNION SELECT e.event_id FROM ltm_items i JOIN ltm_summary_links sl ON sl.item_id = i.id "
        "JOIN ltm_events e ON e.id = sl.event_rowid WHERE i.memory_id IN (SELECT value FROM json_each(:ids))"),
        {"ids": json.dumps(list(memory_ids))})
    return [str(r[0]) for r in rows]


def evidence_of(conn: Connection, memory_ids: Sequence[str], turns: Collection[int]) -> dict[str, frozenset[str]]:
    """Memory id -> its evidence's event ids, a summary's only among ``turns``:
    a busy day's cites thousands. "+type": found by their ids, not by reading
    every summary through the type index."""
    if not memory_ids:
        return {}
    rows = fetch_rows(conn, "SELECT memory_id, event_id FROM ltm_evidence "
                            "WHERE memory_id IN (SELECT value FROM json_each(:ids)) "
                            "UNION ALL SELECT i.memory_id, e.event_id FROM ltm_items i "
                            "CROSS JOIN ltm_summary_links sl ON sl.item_id = i.id "
                            "CROSS JOIN ltm_events e ON e.id = sl.event_rowid "
                            "WHERE i.memory_id IN (SELECT value FROM json_each(:ids)) "
                            "AND sl.event_rowid IN (SELECT value FROM json_each(:turns)) "
                            f"UNION ALL SELECT memory_id, NULL FROM ltm_items WHERE +type = '{MemoryType.SUMMARY}' "
                            "AND memory_id IN (SELECT value FROM json_each(:ids))",
                      {"ids": json.dumps(list(memory_ids)), "turns": json.dumps(sorted(turns))})
    out: dict[str, set[str]] = {}
    for memory_id, event_id in rows:
        cited = out.setdefault(memory_id, set())
        if event_id is not None:
            cited.add(event_id)
    return {k: frozenset(v) for k, v in out.items()}


async def links_of(session: AsyncSession, items: Sequence[MemoryItem]
                   ) -> list[tuple[MemoryEvidence, MemoryEvent | None]]:
    """The items' evidence links with their events (None: not stored
    here), a fact's in the order they were made, a summary's in the order
    of its turns."""
    if not items:
        return []
    facts = (await session.execute(
        select(MemoryEvidence, MemoryEvent)
        .join(MemoryEvent, MemoryEvent.event_id == MemoryEvidence.event_id, isouter=True)
        .where(MemoryEvidence.memory_id.in_([i.memory_id for i in items]))
        .order_by(MemoryEvidence.created_at, MemoryEvidence.id))).all()
    out: list[tuple[MemoryEvidence, MemoryEvent | None]] = [(link, event) for link, event in facts]
    summaries = {i.id: i for i in items if i.type == MemoryType.SUMMARY and i.id is not None}
    if summaries:
        rows = (await session.execute(
            select(SummaryLink.item_id, MemoryEvent).join(MemoryEvent, MemoryEvent.id == SummaryLink.event_rowid)
            .where(SummaryLink.item_id.in_(list(summaries))).order_by(SummaryLink.item_id, MemoryEvent.id))).all()
        out += [(summary_link(summaries[item_id], event.event_id), event) for item_id, event in rows]
    return out


async def cited_events(session: AsyncSession, item: MemoryItem, *, shown_only: bool = False,
                       limit: int | None = None, said_in: Sequence[Scope] = ()) -> list[MemoryEvent]:
    """The events ``item`` cites, oldest first (``shown_only``: not withheld;
    ``said_in``: only those said in these scopes, audience.py)."""
    statement = select(MemoryEvent).where(MemoryEvent.id.in_(select(SummaryLink.event_rowid).where(
        SummaryLink.item_id == item.id)) | MemoryEvent.event_id.in_(select(MemoryEvidence.event_id).where(
            MemoryEvidence.memory_id == item.memory_id)))
    if shown_only:
        statement = statement.where(MemoryEvent.withheld.is_(False))
    if said_in:
        statement = statement.where(or_(*(and_(MemoryEvent.scope == s.kind, MemoryEvent.scope_id == s.id)
                                          for s in said_in)))
    statement = statement.order_by(MemoryEvent.created_at, MemoryEvent.id)
    if limit is not None:
        statement = statement.limit(limit)
    return list((await session.execute(statement)).scalars())


def cited_by_sender(sender_id: str) -> Any:
    """SQL: the memory ids with evidence from this sender's own messages."""
    return select(MemoryEvidence.memory_id).join(MemoryEvent, MemoryEvent.event_id == MemoryEvidence.event_id).where(
        MemoryEvent.sender_id == sender_id).union(
        select(MemoryItem.memory_id).join(SummaryLink, SummaryLink.item_id == MemoryItem.id)
        .join(MemoryEvent, MemoryEvent.id == SummaryLink.event_rowid).where(MemoryEvent.sender_id == sender_id))
