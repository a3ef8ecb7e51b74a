"""The candidates' rows as the read path loads them: slim rows in a few
statements on a read thread, converted by hand. Through the ORM, loading a
read's few hundred candidates cost more than finding them (docs/decisions.md#d25)."""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, ClassVar

from sqlalchemy import Connection

from ..audience import SAID_IN_HERE_SQL, may_recall, reading_param, said_in_sql
from ..clock import as_utc, parse_stored_time
from ..config import ReadPolicy
from ..enums import Status
from ..scope import Scope
from ..storing.driver_rows import fetch_rows
from ..storing.evidence import evidence_of
from ..storing.tables import MemoryItem
from ..storing.turns import shown_turns_among

# Unhit memories still compete ("hi!" gets the name), bounded per scope (docs/decisions.md#d26).
BASELINE_POOL = 20


@dataclass(slots=True)
class ItemRow:
    """A memory: the columns the read path uses."""

    COLUMNS: ClassVar[str] = (
        "id, memory_id, scope, scope_id, type, fact, confidence, importance, status, ttl_days, updated_at, valid_from, "
        "visibility"
    )
    id: int
    memory_id: str
    scope: str
    scope_id: str
    type: str
    fact: str
    confidence: float
    importance: float
    status: str
    ttl_days: int | None
    updated_at: datetime
    # A summary's first event (its day in the block): parsed only where shown.
    valid_from: datetime | str | None
    visibility: str  # enums.Visibility (audience.py)
    # Whose private fact this is when it follows them into a group (followers.py): their name.
    private_to: str | None = None

    @classmethod
    def of(cls, row: Sequence[Any]) -> ItemRow:
        (rowid, memory_id, scope, scope_id, type_, fact, confidence, importance, status, ttl_days, updated_at,
         valid_from, visibility) = row[:13]
        return cls(rowid, memory_id, scope, scope_id, type_, fact, confidence, importance, status, ttl_days,
                   parse_stored_time(updated_at), valid_from, visibility)


# What ranking reads of a memory: a loaded row, or a MemoryItem (tests).
ItemView = ItemRow | MemoryItem


@dataclass(slots=True)
class EventRow:
    """A raw turn: what the read path uses, a row of storing.turns' queries."""

    id: int
    event_id: str
    scope: str
    scope_id: str
    source_type: str
    source_role: str
    content: dict[str, Any]
    sender_id: str | None
    sender_name: str | None
    created_at: datetime
    nothing_kept: bool = False  # extracted, and no fact but a summary cites it (small talk)

    @classmethod
    def of(cls, row: Sequence[Any]) -> EventRow:
        (rowid, event_id, scope, scope_id, source_type, source_role, content, sender_id, sender_name, created_at,
         nothing_kept) = row
        return cls(rowid, event_id, scope, scope_id, source_type, source_role,
                   json.loads(content) if isinstance(content, str) else content,
                   sender_id, sender_name, parse_stored_time(created_at), bool(nothing_kept))


def usable(item: ItemView, policy: ReadPolicy, now: datetime) -> bool:
    """Active, confident enough, and within retention (until the sweep marks it expired)."""
    if item.status != Status.ACTIVE or item.confidence < policy.min_confidence:
        return False
    return item.ttl_days is None or as_utc(item.updated_at) + timedelta(days=item.ttl_days) > now


def load_memories(conn: Connection, scopes: list[Scope], rowids: set[int], policy: ReadPolicy) -> list[ItemRow]:
    """The hits and each scope's most important memories, in one statement, checked
    here (audience.py) so a hit never brings a memory this chat may not hear."""
    return [item for item in recallable(conn, scopes, rowids, "status = :active AND +confidence >= :min_confidence",
                                        {"active": Status.ACTIVE, "min_confidence": policy.min_confidence},
                                        BASELINE_POOL)
            if item.status == Status.ACTIVE and item.confidence >= policy.min_confidence]


def recallable(conn: Connection, scopes: list[Scope], rowids: set[int], pooled: str, params: dict[str, object],
               pool: int) -> list[ItemRow]:
    """The memories ``rowids`` and per scope the ``pool`` most important that ``pooled``
    holds for, among those a chat reading ``scopes`` may recall (audience.py)."""
    params = {**params, "ids": json.dumps(sorted(rowids)), "pool": pool, "reading": reading_param(scopes)}
    columns = f"{ItemRow.COLUMNS}, {SAID_IN_HERE_SQL}"
    parts = [f"SELECT {columns} FROM ltm_items WHERE id IN (SELECT value FROM json_each(:ids))"]
    # A subquery per scope on ix_ltm_items_scope_status (an OR scanned every active item);
    # "+confidence" keeps SQLite off ix_ltm_items_scope_confidence and a sort.
    # Members' rows said in a group go by id: "NOT INDEXED", as a status index grew with the store.
    for n, scope in enumerate(scopes):
        parts.append(f"SELECT * FROM (SELECT {columns} FROM ltm_items WHERE scope = :kind{n} AND scope_id = :id{n} "
                     f"AND {pooled} ORDER BY importance DESC LIMIT :pool)")
        parts.append(f"SELECT * FROM (SELECT {columns} FROM ltm_items NOT INDEXED WHERE id IN ({said_in_sql(n)}) "
                     f"AND {pooled} ORDER BY importance DESC LIMIT :pool)")
        params[f"kind{n}"], params[f"id{n}"] = scope.kind, scope.id
    found: dict[int, ItemRow] = {}
    for row in fetch_rows(conn, " UNION ALL ".join(parts), params):
        item = ItemRow.of(row)
        if item.id not in found and may_recall(Scope(item.scope, item.scope_id), item.visibility, bool(row[13]),
                                               scopes):
            found[item.id] = item
    return list(found.values())


def load_turns(conn: Connection, scopes: list[Scope], rowids: list[int], unbacked: bool) -> dict[int, EventRow]:
    """The turns among ``rowids`` that may be shown (``unbacked``: also those no memory cites)."""
    if not rowids:
        return {}
    wanted = {(s.kind, s.id) for s in scopes}
    rows = shown_turns_among(conn, rowids, unbacked)
    return {row[0]: EventRow.of(row) for row in rows if (row[2], row[3]) in wanted}


def load_evidence(conn: Connection, memory_ids: list[str], turns: Collection[int]) -> dict[str, frozenset[str]]:
    """Memory id -> its evidence's event ids (a summary's among the candidate ``turns``)."""
    return evidence_of(conn, memory_ids, turns)
