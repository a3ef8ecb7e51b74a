"""The raw archive's bound: the turns that may go, and deleting them.

An operator may bound the archive by age (docs/decisions.md#d163): a turn
older than the bound that no memory cites goes whole, in one transaction.
Old turns are walked from a position the caller keeps, so a sweep never
reads the whole archive again per batch.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import Connection, text
from sqlalchemy.ext.asyncio import AsyncSession

from ..enums import ExtractionStatus
from ..scope import Scope
from .changes import TurnsDeleted, note
from .driver_rows import fetch_rows
from .keyword_rows import LEGACY_TURN_ROWS
from .vector_rows import HAS_TABLE, LEGACY_TURN_VECTORS

# (created_at as stored, row id): where a walk of the old turns stands.
Position = tuple[str, int]
START: Position = ("", 0)

# An event no memory cites and extraction is done with.
_UNCITED = (
    f"e.extraction_status != '{ExtractionStatus.PENDING}' "
    "AND NOT EXISTS (SELECT 1 FROM ltm_evidence v WHERE v.event_id = e.event_id) "
    "AND NOT EXISTS (SELECT 1 FROM ltm_summary_links sl WHERE sl.event_rowid = e.id)"
)


def stored_time(at: datetime) -> str:
    """A UTC datetime as SQLite holds ``created_at``."""
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")


@dataclass(frozen=True)
class OldTurn:
    rowid: int
    scope: Scope
    created_at: str
    bytes: int  # its content's, terms' and vectors' (the rest of its row and its index entries: ROW_BYTES)


# What a turn costs beyond its content, terms and vectors: the other
# columns and its entries in the events' indexes (measured on the soak).
ROW_BYTES = 600


@dataclass(frozen=True)
class Walk:
    """A window of the old turns: those that may go, and where it ended."""

    removable: list[OldTurn]
    looked_at: int
    position: Position


def old_turns(conn: Connection, cutoff: datetime, after: Position, window: int) -> Walk:
    """The next ``window`` turns said before ``cutoff``, after ``after``, and which may go."""
    rows = fetch_rows(conn, (
        "SELECT e.id, e.scope, e.scope_id, e.created_at, "
        f"CASE WHEN {_UNCITED} THEN length(e.content) + coalesce((SELECT length(t.terms) FROM ltm_turn_terms t "
        "WHERE t.event_rowid = e.id), 0) + coalesce((SELECT length(tv.vector) FROM ltm_turn_vectors tv "
        "WHERE tv.event_rowid = e.id), 0) END "
        "FROM ltm_events e WHERE e.created_at < :cutoff "
        "AND (e.created_at > :at OR (e.created_at = :at AND e.id > :id)) "
        "ORDER BY e.created_at, e.id LIMIT :n"),
        {"cutoff": stored_time(cutoff), "at": after[0], "id": after[1], "n": window})
    removable = [OldTurn(int(r[0]), Scope(str(r[1]), str(r[2])), str(r[3]), int(r[4]) + ROW_BYTES)
                 for r in rows if r[4] is not None]
    position = (str(rows[-1][3]), int(rows[-1][0])) if rows else after
    return Walk(removable, len(rows), position)


async def delete_turns(session: AsyncSession, turns: Sequence[OldTurn]) -> int:
    """Delete ``turns`` with their terms and vectors, each only if it still may
    go (a memory may cite it since). Returns how many went."""
    if not turns:
        return 0
    ids = json.dumps([t.rowid for t in turns])
    still = [int(r[0]) for r in (await session.execute(text(
        f"SELECT e.id FROM ltm_events e WHERE e.id IN (SELECT value FROM json_each(:ids)) AND {_UNCITED}"),
        {"ids": ids})).all()]
    if not still:
        return 0
    gone = json.dumps(still)
    for table, key in (("ltm_turn_vectors", "event_rowid"), ("ltm_turn_terms", "event_rowid")):
        await session.execute(text(f"DELETE FROM {table} WHERE {key} IN (SELECT value FROM json_each(:ids))"),
                              {"ids": gone})
    for table, key in ((LEGACY_TURN_VECTORS, "event_rowid"), (LEGACY_TURN_ROWS, "rowid")):  # a store still moving
        if (await session.execute(text(HAS_TABLE), {"t": table})).first():
            await session.execute(text(f"DELETE FROM {table} WHERE {key} IN (SELECT value FROM json_each(:ids))"),
                                  {"ids": gone})
    await session.execute(text("DELETE FROM ltm_events WHERE id IN (SELECT value FROM json_each(:ids))"),
                          {"ids": gone})
    kept = set(still)
    by_scope: dict[Scope, list[int]] = {}
    for turn in turns:
        if turn.rowid in kept:
            by_scope.setdefault(turn.scope, []).append(turn.rowid)
    note(session, *(TurnsDeleted(scope, tuple(rowids)) for scope, rowids in by_scope.items()))
    return len(still)
